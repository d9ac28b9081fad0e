// torch's fused SGD and AdamW kernels over whole parameter groups.
#include "multi_tensor_step.hpp"

#include <ATen/ATen.h>

namespace mnddp::multi_tensor {

bool alike(const at::Tensor& param, std::initializer_list<const at::Tensor*> others) {
  const bool floating = param.scalar_type() == at::kFloat || param.scalar_type() == at::kHalf ||
                        param.scalar_type() == at::kBFloat16 || param.scalar_type() == at::kDouble;
  if (!floating || !param.is_non_overlapping_and_dense()) return false;
  for (const at::Tensor* t : others) {
    if (!t->defined()) continue;
    if (t->device() != param.device() || t->scalar_type() != param.scalar_type() ||
        !t->is_non_overlapping_and_dense() || t->strides() != param.strides() || t->sizes() != param.sizes())
      return false;
  }
  return true;
}

namespace {

// The kernels read the flag as a scalar.
std::optional<at::Tensor> as_scalar(const std::optional<at::Tensor>& skip) {
  if (!skip) return std::nullopt;
  return skip->reshape({});
}

}  // namespace

void sgd(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
         const std::vector<at::Tensor>& buffers, const torch::optim::SGDOptions& options, bool first,
         const std::optional<at::Tensor>& skip) {
  at::_fused_sgd_(params, grads, buffers, options.weight_decay(), options.momentum(), options.lr(), options.dampening(),
                  options.nesterov(), /*maximize=*/false, first, /*grad_scale=*/std::nullopt, as_scalar(skip));
}

void adamw(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
           const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
           const std::vector<at::Tensor>& steps, const torch::optim::AdamWOptions& options,
           const std::optional<at::Tensor>& skip) {
  const auto [beta1, beta2] = options.betas();
  const auto flag = as_scalar(skip);
  at::_foreach_add_(steps, 1);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, options.lr(), beta1, beta2,
                    options.weight_decay(), options.eps(), /*amsgrad=*/false, /*maximize=*/false,
                    /*grad_scale=*/std::nullopt, flag);
  // A skipped step does not count (torch's _fused_adamw does the same after its kernel).
  if (flag) at::_foreach_sub_(steps, std::vector<at::Tensor>(steps.size(), *flag));
}

}  // namespace mnddp::multi_tensor
