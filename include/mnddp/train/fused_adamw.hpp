// torch::optim::AdamW with each parameter updated in three passes over cache-sized pieces (the moments,
// torch's square root, the update) instead of torch's nine over whole tensors with two temporaries:
// the same float operations in the same order, fused multiply-adds exactly where torch's kernels have
// them, so parameters, moments and checkpoints stay bitwise torch's (tests/unit/test_fused_adamw.cpp
// checks it against torch's AdamW). The first pass also reads each gradient's exponent bits
// (nonfinite_seen()). Dense float32 host tensors without amsgrad take the passes; anything else takes
// torch's operations.
#pragma once

#include <torch/optim/adamw.h>

#include "mnddp/train/checks_gradients.hpp"

namespace mnddp {

class FusedAdamW final : public torch::optim::AdamW, public ChecksGradients {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
  bool nonfinite_seen() const override { return nonfinite_seen_; }

 private:
  // A parameter's state, made as torch makes it on the parameter's first step.
  torch::optim::AdamWParamState& state_of(const at::Tensor& param, bool amsgrad);

  bool nonfinite_seen_ = false;
  at::Tensor scratch_;  // torch's square roots of a piece of the second moment
};

}  // namespace mnddp
