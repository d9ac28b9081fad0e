// torch::optim::AdamW with each parameter updated in three passes over cache-sized pieces (the moments,
// torch's square root, the update) instead of torch's nine over whole tensors with two temporaries:
// the same float operations in the same order, fused multiply-adds exactly where torch's kernels have
// them, so parameters, moments and checkpoints stay bitwise torch's (tests/unit/test_fused_adamw.cpp
// checks it against torch's AdamW). The first pass also reads each gradient's exponent bits
// (nonfinite_seen()). Dense float32 host tensors without amsgrad take the passes; device tensors
// take ATen's multi-tensor kernel (_fused_adamw_, within 1e-6 of torch's AdamW), one launch per
// group; anything else takes torch's operations.
#pragma once

#include <torch/optim/adamw.h>

#include <optional>
#include <unordered_map>

#include "mnddp/optim/checks_gradients.hpp"
#include "mnddp/optim/device_gated_optimizer.hpp"

namespace mnddp {

class FusedAdamW final : public torch::optim::AdamW, public ChecksGradients, public DeviceGatedOptimizer {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
  bool nonfinite_seen() const override { return nonfinite_seen_; }
  bool gates_on_device() const override;
  void step_unless(const at::Tensor& skip) override;
  void sync_state_to_host() override;

 private:
  at::Tensor run(const LossClosure& closure, const std::optional<at::Tensor>& skip);
  // A parameter's state, made as torch makes it on the parameter's first step.
  torch::optim::AdamWParamState& state_of(const at::Tensor& param, bool amsgrad);
  // The kernel's copy of a parameter's step count (a float scalar on its device), made from the host
  // state's count the first time, and again when the state was replaced (a resume).
  at::Tensor& device_step(const at::Tensor& param, torch::optim::AdamWParamState& state);

  bool nonfinite_seen_ = false;
  at::Tensor scratch_;  // torch's square roots of a piece of the second moment
  struct DeviceStep {
    const torch::optim::OptimizerParamState* owner = nullptr;  // the host state it counts for
    const void* moments = nullptr;                             // and that state's exp_avg
    at::Tensor count;
  };
  std::unordered_map<void*, DeviceStep> device_steps_;
  bool host_steps_stale_ = false;  // a gated step ran: the host's counts may be ahead
};

}  // namespace mnddp
