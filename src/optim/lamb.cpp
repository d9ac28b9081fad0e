// LAMB: Adam's bias-corrected moments, decoupled weight decay and the per-tensor trust ratio of
// You et al. 2019 (Algorithm 2), as Note [LAMB update] states it.
#include "mnddp/optim/lamb.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>
#include <utility>

namespace mnddp {

// Note [LAMB update]
// For each tensor w of a group with gradient g (a tensor without a gradient this step is left
// alone, its step count too), with lr, beta1, beta2, eps and weight decay wd, t its step count
// after this step:
//
//   m = beta1 * m + (1 - beta1) * g                 v = beta2 * v + (1 - beta2) * g^2
//   m_hat = m / (1 - beta1^t)                       v_hat = v / (1 - beta2^t)
//   r = m_hat / (sqrt(v_hat) + eps) + wd * w
//   ratio = ||w|| / ||r||   if ||w|| > 0 and ||r|| > 0, else 1   (ratio = 1 where adapt is false)
//   w = w - lr * ratio * r
//
// Norms are L2 over the whole tensor (phi in the paper is the identity). This is the paper's
// Algorithm 2 with bias correction (apex FusedLAMB's bias_correction=True). It does no gradient
// clipping of its own (apex and timm clip the global norm to 1 by default; mnddp has --grad-clip).
// The second param group (norms and biases) has weight decay 0 and no trust ratio, as the reference
// implementation's exclude_from_layer_adaptation defaults to its decay exclusions (apex and timm
// skip the ratio wherever weight decay is 0; here the group decides, whatever --weight-decay is).
Lamb::Lamb(const std::vector<torch::optim::OptimizerParamGroup>& groups, LambOptions defaults)
    : Optimizer(groups, std::make_unique<LambOptions>(std::move(defaults))) {}

at::Tensor Lamb::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const LambOptions&>(group.options());
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<at::Scalar> correction1, correction2;  // per tensor: step counts may differ
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      auto& slot = state_[param.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<LambParamState>();
        fresh->exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<LambParamState&>(*slot);
      state.step(state.step() + 1);
      const auto t = static_cast<double>(state.step());
      correction1.emplace_back(1.0 - std::pow(options.beta1(), t));
      correction2.emplace_back(1.0 - std::pow(options.beta2(), t));
      params.push_back(param);
      grads.push_back(param.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
    }
    if (params.empty()) {
      if (options.adapt()) join_norms_without_tensors(2);
      continue;
    }

    at::_foreach_mul_(exp_avgs, options.beta1());
    at::_foreach_add_(exp_avgs, grads, 1.0 - options.beta1());
    at::_foreach_mul_(exp_avg_sqs, options.beta2());
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - options.beta2());

    std::vector<at::Tensor> update = at::_foreach_div(exp_avgs, correction1);    // m_hat
    std::vector<at::Tensor> denom = at::_foreach_div(exp_avg_sqs, correction2);  // v_hat
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, options.eps());
    at::_foreach_div_(update, denom);
    if (options.weight_decay() != 0.0) at::_foreach_add_(update, params, options.weight_decay());
    if (options.adapt()) {
      // All ratios at once, on the device: no norm travels to the host.
      const at::Tensor w_norm = norms_of(params, params);
      const at::Tensor r_norm = norms_of(params, update);
      const at::Tensor ratio = at::where(w_norm.gt(0).logical_and(r_norm.gt(0)), w_norm.div(r_norm), 1.0);
      at::_foreach_mul_(update, ratio.unbind(0));
    }
    at::_foreach_add_(params, update, -options.lr());
  }
  return loss;
}

}  // namespace mnddp
