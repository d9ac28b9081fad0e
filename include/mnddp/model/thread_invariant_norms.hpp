// BatchNorm2d and LayerNorm whose results do not depend on the thread count under --deterministic.
// Two of torch's CPU norm kernels sum per-thread partials, so their output changes with --threads:
// BatchNorm's channels-last kernel (which an [N, C, 1, 1] input, a ResNet's last stage on small
// images, also takes) and LayerNorm's backward for its weight and bias. These modules route just those
// cases around the kernels while deterministic algorithms are on, and are torch's modules otherwise:
// the same parameters, buffers and names, so checkpoints and exports are unchanged.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/normalization.h>

#include <functional>

namespace mnddp {

// batch_norm(input) for a training-mode input: called as is, or, when deterministic algorithms are
// on and the channels are the input's innermost dimension (stride 1), on the same values laid out
// [1, C, N*H*W, 1] (channel-major: torch's per-channel kernel) and transposed back.
at::Tensor thread_invariant_batch_norm(const at::Tensor& input,
                                       const std::function<at::Tensor(const at::Tensor&)>& batch_norm);

class ThreadInvariantBatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
 public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;
  at::Tensor forward(const at::Tensor& input);
};
TORCH_MODULE(ThreadInvariantBatchNorm2d);

class ThreadInvariantLayerNormImpl : public torch::nn::LayerNormImpl {
 public:
  using torch::nn::LayerNormImpl::LayerNormImpl;
  // Under deterministic algorithms with autograd on: torch's layer_norm without the affine part,
  // then `* weight + bias`, whose gradients are plain per-column sums.
  at::Tensor forward(const at::Tensor& input);
};
TORCH_MODULE(ThreadInvariantLayerNorm);

}  // namespace mnddp
