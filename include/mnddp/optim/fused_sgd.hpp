// torch::optim::SGD with each parameter updated in one pass instead of torch's three or four (weight
// decay, momentum's mul_ and add_, the update): the same float operations in the same order, fused
// multiply-adds exactly where torch's kernels use them, so parameters, momentum buffers and
// checkpoints stay bitwise torch's (tests/unit/test_fused_sgd.cpp checks it against torch's SGD). The
// same pass reads each gradient's exponent bits, which makes the --on-nonfinite abort check free:
// nonfinite_seen(). Dense float32 host tensors take the fused pass; device tensors take ATen's
// multi-tensor kernel (_fused_sgd_, what torch.optim.SGD(fused=True) runs: within 1e-6 of torch's
// per-parameter SGD), one launch per group and first-step state; anything else takes torch's own operations.
#pragma once

#include <torch/optim/sgd.h>

#include <optional>

#include "mnddp/optim/checks_gradients.hpp"
#include "mnddp/optim/device_gated_optimizer.hpp"

namespace mnddp {

class FusedSgd final : public torch::optim::SGD, public ChecksGradients, public DeviceGatedOptimizer {
 public:
  using torch::optim::SGD::SGD;
  at::Tensor step(LossClosure closure = nullptr) override;
  bool nonfinite_seen() const override { return nonfinite_seen_; }
  bool gates_on_device() const override;
  void step_unless(const at::Tensor& skip) override;
  void sync_state_to_host() override {}  // the momentum buffers are the state itself

 private:
  at::Tensor run(const LossClosure& closure, const std::optional<at::Tensor>& skip);

  // A parameter's first step: its momentum buffer (torch's clone of the update's gradient; the
  // pass writes it in place) becomes the parameter's state. Returns it.
  at::Tensor keep_momentum_buffer(const at::Tensor& param, at::Tensor buffer);

  bool nonfinite_seen_ = false;
};

}  // namespace mnddp
