// ATen's multi-tensor optimizer kernels, one call over a parameter group's tensors: torch's
// _fused_sgd_ and _fused_adamw_ (what torch.optim.SGD/AdamW(fused=True) run). For FusedSgd and
// FusedAdamW on a GPU, where per-parameter operations would launch 4-9 kernels a parameter.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <initializer_list>
#include <optional>
#include <vector>

namespace mnddp::multi_tensor {

// Whether a parameter and its gradient and state (undefined ones left out) suit the kernels: one
// device, one float type, dense, and laid out alike (element i of one is element i of the others).
bool alike(const at::Tensor& param, std::initializer_list<const at::Tensor*> others);

// One SGD step over the lists (momentum buffers empty without momentum). `first`: the buffers take
// the update's gradient, as torch's first step clones it. `skip`: a one-element flag on the device,
// 0 or 1 (the kernels test for 1); 1 leaves everything as it was.
void sgd(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
         const std::vector<at::Tensor>& buffers, const torch::optim::SGDOptions& options, bool first,
         const std::optional<at::Tensor>& skip);

// One AdamW step over the lists; `steps`: each parameter's step count as a float scalar on its
// device, incremented here (and left as it was where `skip` is nonzero).
void adamw(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
           const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
           const std::vector<at::Tensor>& steps, const torch::optim::AdamWOptions& options,
           const std::optional<at::Tensor>& skip);

}  // namespace mnddp::multi_tensor
