// The model zoo: networks chosen by name from the config, each sized from one sample's shape and
// the task's output width. mlp and convnet map float samples [N, sample_shape...] to [N, outputs]
// (class logits or regression targets), and so do resnet18/34/50 and vit for images [C, H, W] and
// cnn3d for volumes [C, D, H, W]; gpt maps token ids [N, T] to next-token logits [N, T, vocab].
// torchscript is the user's own module, loaded from a file and checked against the task.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/model/sample_randomness.hpp"

namespace mnddp {

class Model : public torch::nn::Module {
 public:
  Model() : sample_randomness_(std::make_shared<SampleRandomness>()) {}
  virtual at::Tensor forward(at::Tensor x) = 0;

  // What the built-in models' dropout masks are keyed by: call set_batch before each training
  // forward, so that a sample's masks do not depend on its rank or batch. The TorchScript model
  // draws its own.
  SampleRandomness& sample_randomness() { return *sample_randomness_; }

 protected:
  std::shared_ptr<SampleRandomness> sample_randomness_;  // handed to each SampleDropout
};

struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  std::vector<std::int64_t> input_shape;  // one sample's shape (gpt: [context])
  std::int64_t num_outputs = 10;          // classes, regression targets, or the vocabulary (gpt)
  int hidden = 256;                       // MLP width / ConvNet base channels / GPT d_model
  int layers = 2;                         // MLP hidden layers / ConvNet blocks / GPT blocks
  int heads = 4;                          // ViT, GPT attention heads
  int patch_size = 4;                     // ViT
  double dropout = 0.0;
  bool batch_norm = true;      // ConvNet only
  Stem stem = Stem::Auto;      // ResNet: auto takes the CIFAR stem for images up to kCifarStemMaxSide
  bool tie_embeddings = true;  // GPT: the output projection is the token embedding's weight
  // ConvNet, ResNet: SyncBatchNorm2d instead of BatchNorm2d; bind_sync_batch_norm (model/
  // sync_batch_norm.hpp) must then hand the layers their communicator before training.
  bool sync_batch_norm = false;

  // TorchScript: the file, and what the task needs, checked by one forward pass at load time.
  std::string torchscript_path;
  bool token_input = false;                // int64 token ids (lm), else float samples
  std::vector<std::int64_t> output_shape;  // one sample's output: [classes], [targets] or [T, vocab]
  std::string output_meaning;              // e.g. "--task classification with 10 classes"
};

// Stem::Auto gives a ResNet the CIFAR stem (3x3, no pooling) when height and width are at most this;
// the ImageNet stem (7x7 stride 2, max-pool) would shrink such images to almost nothing.
inline constexpr std::int64_t kCifarStemMaxSide = 64;

// Throws UsageError for an input shape the model cannot take, and (torchscript) for a file that is
// not TorchScript or a module whose output does not fit spec.output_shape.
std::shared_ptr<Model> make_model(const ModelSpec& spec);

std::int64_t parameter_count(const torch::nn::Module& module);

// GPT's published count: V·d + C·d (embeddings) + L·(12d² + 13d) (blocks) + 2d (final LayerNorm),
// plus V·d for an untied output layer. For the test that the implementation matches it.
std::int64_t gpt_parameter_formula(std::int64_t vocab, std::int64_t context, std::int64_t d_model, std::int64_t layers,
                                   bool tied);

}  // namespace mnddp
