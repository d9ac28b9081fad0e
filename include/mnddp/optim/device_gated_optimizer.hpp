// An optimizer whose step on a GPU runs on ATen's multi-tensor kernels (_fused_sgd_, _fused_adamw_:
// one launch per parameter group instead of 4-9 per parameter) and can be skipped by a flag that
// stays on the device, so the host never waits for a NaN/Inf or loss-scale verdict (torch's fused
// optimizers take GradScaler's found_inf the same way). FusedSgd and FusedAdamW implement it.
#pragma once

#include <ATen/core/Tensor.h>

namespace mnddp {

class DeviceGatedOptimizer {
 public:
  virtual ~DeviceGatedOptimizer() = default;

  // Whether every parameter with a gradient would take the multi-tensor kernels (device tensors of
  // a float type, each laid out like its gradient and state), so that step_unless() needs no host.
  virtual bool gates_on_device() const = 0;
  // step(), except that where `skip` (one float on the parameters' device, 0 or 1) is 1, parameters
  // and state are left as they were: the kernels read it on the device.
  virtual void step_unless(const at::Tensor& skip) = 0;
  // Step counts the kernels keep on the device (AdamW's bias corrections), copied into the host
  // state (one transfer) when a gated step may have left the host's stale: before anything reads the
  // state (a checkpoint).
  virtual void sync_state_to_host() = 0;
  // Steps host tensors through the multi-tensor kernels too (ATen has them for the CPU), instead of
  // mnddp's one-pass loops: for tests that compare the two paths.
  void use_kernels_on_cpu(bool on) { kernels_on_cpu_ = on; }

 protected:
  // Whether `param` (and its gradient) take the kernels.
  bool takes_kernels(const at::Tensor& param) const { return !param.is_cpu() || kernels_on_cpu_; }

 private:
  bool kernels_on_cpu_ = false;
};

}  // namespace mnddp
