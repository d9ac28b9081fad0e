// Dynamic loss scaling on ATen's fused AMP kernels (the ones torch's GradScaler uses).
#include "mnddp/amp/loss_scaler.hpp"

#include <ATen/ATen.h>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"

namespace mnddp {

LossScaler::LossScaler(LossScalerOptions options, c10::Device device) : options_(options) {
  const auto on_device = at::TensorOptions().device(device);
  scale_ = at::full({1}, options_.init_scale, on_device.dtype(at::kFloat));
  growth_tracker_ = at::zeros({1}, on_device.dtype(at::kInt));
  found_inf_ = at::zeros({1}, on_device.dtype(at::kFloat));
}

at::Tensor LossScaler::scale(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_.to(loss.scalar_type());
}

bool LossScaler::unscale(const std::vector<at::Tensor>& parameters, Communicator* agree_over) {
  if (!options_.enabled) return true;
  unscale_on_device(parameters, agree_over);
  return found_inf_.item<float>() == 0.0f;  // one host sync per step, as GradScaler.step has
}

void LossScaler::unscale_on_device(const std::vector<at::Tensor>& parameters, Communicator* agree_over) {
  if (!options_.enabled) return;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  found_inf_.zero_();
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  if (agree_over != nullptr) {
    const CollectiveLabel label("fp16 loss scaler: found inf");
    allreduce(*agree_over, found_inf_, ReduceOp::Max);
  }
}

void LossScaler::update() {
  if (!options_.enabled) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
}

double LossScaler::current_scale() const { return scale_.item<double>(); }

void LossScaler::load_state(double scale, int growth_tracker) {
  scale_.fill_(scale);
  growth_tracker_.fill_(growth_tracker);
}

}  // namespace mnddp
