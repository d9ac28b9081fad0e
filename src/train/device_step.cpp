// The GPU's optimizer step, gated on the device, and the host's periodic reading of it.
#include "device_step.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "mnddp/diagnose/parameter_fingerprint.hpp"
#include "mnddp/optim/device_gated_optimizer.hpp"
#include "mnddp/train/gradient_check.hpp"
#include "training_run.hpp"

namespace mnddp {

void clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  const at::Tensor total = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads, 2)), 2);
  const at::Tensor coefficient = at::clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  at::_foreach_mul_(grads, coefficient);
}

void apply_gradients_on_device(TrainingRun& r, std::int64_t step) {
  const std::vector<at::Tensor> params = r.zero ? r.zero->bind_gradients() : r.model->parameters();
  at::Tensor found;
  if (r.scaler->enabled()) {
    // Under ZeRO each rank holds other pieces: the scaler's verdict is all-reduced (on the GPU).
    r.scaler->unscale_on_device(params, r.zero ? r.gradient_comm.get() : nullptr);
    found = r.scaler->found_inf();
  } else if (r.zero) {
    found = r.zero->nonfinite_flag();
  } else {
    // The gradients are all-reduced, the same on every rank: so is the verdict.
    std::vector<at::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(r.device.device));
    find_nonfinite(grads, found);
  }
  const at::Tensor skip = r.ledger->gate(found, step);
  if (r.config.grad_clip > 0.0) {
    if (r.zero) {
      r.zero->clip_grad_norm(r.config.grad_clip);
    } else {
      clip_grad_norm_on_device(params, r.config.grad_clip);
    }
  }
  auto* gated = dynamic_cast<DeviceGatedOptimizer*>(r.optimizer.get());
  if (gated != nullptr && gated->gates_on_device()) {
    gated->step_unless(skip);
  } else if (skip.item<float>() == 0.0f) {  // LARS, LAMB: the host decides (a wait)
    r.optimizer->step();
  }
  if (r.zero) {
    r.zero->all_gather_parameters();  // a skipped step gathers the pieces as they were
    r.zero->release_gradients();
  }
  r.scaler->update();
  if (r.faults.drifts_replica(step)) flip_mantissa_bit(r.model->parameters().front());
}

void settle_ledger(TrainingRun& r, std::int64_t step) {
  if (!r.ledger) return;
  const StepLedger::Reading reading = r.ledger->read();
  r.log->add_loss(reading.loss_sum);
  if (reading.skipped == 0) return;
  r.skipped_steps += reading.skipped;
  if (r.scaler->enabled()) {
    if (r.control.is_root())
      spdlog::warn(
          "{} step(s) up to step {} skipped: inf/NaN gradients under the fp16 loss scale (the first at step "
          "{}); the scale is now {}",
          reading.skipped, step, reading.first_skipped, r.scaler->current_scale());
    return;
  }
  const std::string afterwards =
      reading.skipped == 1 && reading.first_skipped == step
          ? std::string()
          : fmt::format("; {} step(s) skipped on the GPU up to step {}, where its verdict was read", reading.skipped,
                        step);
  nonfinite_gradients_found(reading.first_skipped, reading.first_skipped_loss, r.config.on_nonfinite, r.control,
                            afterwards);
}

}  // namespace mnddp
