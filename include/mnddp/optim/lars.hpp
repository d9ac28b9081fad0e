// LARS (You et al. 2017, "Large Batch Training of Convolutional Networks") in the form MLPerf's
// ResNet-50 submissions train with: a per-tensor trust ratio on the decayed gradient, then heavy-ball
// momentum. The exact rule is in Note [LARS update] (src/train/lars.cpp) and docs/MODELS.md.
#pragma once

#include <torch/arg.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

#include "mnddp/optim/tensor_norms.hpp"

namespace mnddp {

struct LarsOptions : public torch::optim::OptimizerCloneableOptions<LarsOptions> {
  explicit LarsOptions(double lr = 0.1) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(double, eta) = 0.001;  // trust coefficient
  TORCH_ARG(double, eps) = 1e-8;   // in the trust ratio's denominator
  // false: plain SGD with momentum for this group (no trust ratio); MLPerf's norms and biases.
  TORCH_ARG(bool, adapt) = true;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LarsParamState : public torch::optim::OptimizerCloneableParamState<LarsParamState> {
  TORCH_ARG(at::Tensor, momentum_buffer);  // zeros before the first step
};

class Lars : public torch::optim::Optimizer, public UsesTensorNorms {
 public:
  Lars(const std::vector<torch::optim::OptimizerParamGroup>& groups, LarsOptions defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace mnddp
