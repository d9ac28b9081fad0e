// The device-side ledger of a GPU's training steps.
#include "mnddp/train/step_ledger.hpp"

#include <ATen/ATen.h>

namespace mnddp {

StepLedger::StepLedger(c10::Device device, NonfiniteGradients policy, bool scaler) : policy_(policy), scaler_(scaler) {
  const auto doubles = at::TensorOptions().dtype(at::kDouble).device(device);
  step_loss_ = at::zeros({1}, doubles);
  interval_loss_ = at::zeros({1}, doubles);
  skipped_ = at::zeros({1}, doubles);
  first_skipped_ = at::full({1}, -1.0, doubles);
  first_loss_ = at::zeros({1}, doubles);
  stuck_ = at::zeros({1}, doubles.dtype(at::kFloat));
}

void StepLedger::add_micro_loss(const at::Tensor& loss, int accumulation) {
  step_loss_.add_(loss.detach().to(at::kDouble).reshape({1}) / static_cast<double>(accumulation));
}

at::Tensor StepLedger::gate(const at::Tensor& found_inf, std::int64_t step) {
  // Exactly 0 or 1: the fused kernels skip only where the flag is 1, and AdamW's step counts take it
  // back by its value.
  at::Tensor skip = (found_inf.reshape({1}) > 0).to(at::kFloat);
  if (!scaler_ && policy_ == NonfiniteGradients::Abort) {
    stuck_ = at::maximum(stuck_, skip);
    skip = stuck_;
  }
  const at::Tensor skipped_now = skip.to(at::kDouble);
  const at::Tensor first = (skipped_now > 0) & (first_skipped_ < 0);
  first_skipped_ = at::where(first, static_cast<double>(step), first_skipped_);
  first_loss_ = at::where(first, step_loss_, first_loss_);
  skipped_.add_(skipped_now);
  end_step();
  return skip;
}

void StepLedger::end_step() {
  interval_loss_.add_(step_loss_);
  step_loss_.zero_();
}

StepLedger::Reading StepLedger::read() {
  const at::Tensor host = at::cat({interval_loss_, skipped_, first_skipped_, first_loss_}).to(at::kCPU);
  const auto* values = host.const_data_ptr<double>();
  Reading reading{values[0], static_cast<std::int64_t>(values[1]), static_cast<std::int64_t>(values[2]), values[3]};
  interval_loss_.zero_();
  skipped_.zero_();
  first_skipped_.fill_(-1.0);
  first_loss_.zero_();
  return reading;
}

}  // namespace mnddp
