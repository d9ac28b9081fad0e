// The model zoo: networks chosen by name from the config. Each maps a batch [N, sample_shape...]
// to class logits [N, num_classes].
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"

namespace mnddp {

class Classifier : public torch::nn::Module {
 public:
  virtual at::Tensor forward(at::Tensor x) = 0;
};

struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  std::vector<std::int64_t> input_shape;  // one sample's shape
  int num_classes = 10;
  int hidden = 256;  // MLP width / ConvNet base channels
  int layers = 2;    // MLP hidden layers / ConvNet blocks
  double dropout = 0.0;
  bool batch_norm = true;  // ConvNet only
};

// Throws UsageError for an unknown name or an input shape the model cannot take.
std::shared_ptr<Classifier> make_model(const ModelSpec& spec);

std::int64_t parameter_count(const torch::nn::Module& module);

}  // namespace mnddp
