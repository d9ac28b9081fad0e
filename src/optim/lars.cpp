// LARS: the per-tensor trust ratio of You et al. 2017 on the decayed gradient, then heavy-ball
// momentum, in the form MLPerf's ResNet-50 submissions use (Note [LARS update]).
#include "mnddp/optim/lars.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <utility>

namespace mnddp {

// Note [LARS update]
// For each tensor w of a group with gradient g (a tensor without a gradient this step is left
// alone, state and all), with lr, momentum m, weight decay wd, trust coefficient eta and eps:
//
//   ratio = eta * ||w|| / (||g|| + wd * ||w|| + eps)   if ||w|| > 0 and ||g|| > 0, else 1
//   d     = ratio * (g + wd * w)                       (ratio = 1 in a group with adapt false)
//   v     = m * v + d                                  (v starts at zero)
//   w     = w - lr * v
//
// Norms are L2 over the whole tensor. This is NVIDIA's MLPerf LARS and apex's LARC (clip false):
// the ratio scales the gradient before it enters the momentum. MXNet's form keeps lr inside the
// buffer (v = m v + lr d, w -= v), which is the same at a constant lr and differs when the schedule
// changes lr; TensorFlow's contrib LARSOptimizer scales the whole buffer by lr * ratio instead
// (v = m v + (g + wd w), w -= lr ratio v). Parameters excluded from adaptation (norms and biases,
// the second param group) get no ratio and weight decay 0: plain SGD with momentum, as in MLPerf.
Lars::Lars(const std::vector<torch::optim::OptimizerParamGroup>& groups, LarsOptions defaults)
    : Optimizer(groups, std::make_unique<LarsOptions>(std::move(defaults))) {}

at::Tensor Lars::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const LarsOptions&>(group.options());
    std::vector<at::Tensor> params, grads, buffers;
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      auto& slot = state_[param.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<LarsParamState>();
        fresh->momentum_buffer(at::zeros_like(param, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      params.push_back(param);
      grads.push_back(param.grad());
      buffers.push_back(static_cast<LarsParamState&>(*slot).momentum_buffer());
    }
    if (params.empty()) {
      if (options.adapt()) join_norms_without_tensors(2);
      continue;
    }

    const double decay = options.weight_decay();
    std::vector<at::Tensor> update = decay != 0.0 ? at::_foreach_add(grads, params, decay) : grads;
    if (options.adapt()) {
      // All ratios at once, on the device: no norm travels to the host.
      const at::Tensor w_norm = norms_of(params, params);
      const at::Tensor g_norm = norms_of(params, grads);
      const at::Tensor trusted = w_norm.mul(options.eta()).div(g_norm.add(w_norm, decay).add(options.eps()));
      const at::Tensor ratio = at::where(w_norm.gt(0).logical_and(g_norm.gt(0)), trusted, 1.0);
      update = at::_foreach_mul(update, ratio.unbind(0));
    }
    at::_foreach_mul_(buffers, options.momentum());
    at::_foreach_add_(buffers, update);
    at::_foreach_add_(params, buffers, -options.lr());
  }
  return loss;
}

}  // namespace mnddp
