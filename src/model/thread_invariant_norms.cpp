// Thread-invariant BatchNorm2d and LayerNorm (see the header for why).
#include "mnddp/model/thread_invariant_norms.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/autograd.h>

namespace mnddp {
namespace {

// Identity forward; backward hands on a contiguous gradient. The transposes around the channel-major
// batch_norm would otherwise give its backward an output gradient strided channels-last while its
// input is contiguous, and torch's CPU backward kernel (2.11) then computes wrong gradients.
struct ContiguousGradient : torch::autograd::Function<ContiguousGradient> {
  static at::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    return {grads[0].contiguous()};
  }
};

}  // namespace

at::Tensor thread_invariant_batch_norm(const at::Tensor& input,
                                       const std::function<at::Tensor(const at::Tensor&)>& batch_norm) {
  if (!at::globalContext().deterministicAlgorithms() || input.dim() != 4 || input.stride(1) != 1 ||
      input.size(1) == 1 || input.is_cuda())
    return batch_norm(input);
  const auto n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  const at::Tensor channel_major = input.permute({1, 0, 2, 3}).contiguous().view({1, c, n * h * w, 1});
  return ContiguousGradient::apply(batch_norm(channel_major)).view({c, n, h, w}).permute({1, 0, 2, 3}).contiguous();
}

at::Tensor ThreadInvariantBatchNorm2dImpl::forward(const at::Tensor& input) {
  if (!is_training()) return BatchNorm2dImpl::forward(input);  // running statistics: element-wise
  return thread_invariant_batch_norm(input, [this](const at::Tensor& x) { return BatchNorm2dImpl::forward(x); });
}

at::Tensor ThreadInvariantLayerNormImpl::forward(const at::Tensor& input) {
  if (!at::globalContext().deterministicAlgorithms() || !at::GradMode::is_enabled() || !options.elementwise_affine() ||
      input.is_cuda())
    return LayerNormImpl::forward(input);
  const at::Tensor normalised = at::layer_norm(input, options.normalized_shape(), {}, {}, options.eps());
  return normalised * weight + bias;
}

}  // namespace mnddp
