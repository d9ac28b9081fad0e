// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
// minutes"): Adam moments with bias correction, decoupled weight decay, and a per-tensor trust
// ratio. The exact rule is in Note [LAMB update] (src/train/lamb.cpp) and docs/MODELS.md.
#pragma once

#include <torch/arg.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

#include "mnddp/optim/tensor_norms.hpp"

namespace mnddp {

struct LambOptions : public torch::optim::OptimizerCloneableOptions<LambOptions> {
  explicit LambOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.0;
  // false: no trust ratio for this group (ratio 1: a bias-corrected Adam step), as the reference
  // implementation does for the parameters it excludes from decay (norms and biases).
  TORCH_ARG(bool, adapt) = true;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LambParamState : public torch::optim::OptimizerCloneableParamState<LambParamState> {
  TORCH_ARG(std::int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg);
  TORCH_ARG(at::Tensor, exp_avg_sq);
};

class Lamb : public torch::optim::Optimizer, public UsesTensorNorms {
 public:
  Lamb(const std::vector<torch::optim::OptimizerParamGroup>& groups, LambOptions defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace mnddp
