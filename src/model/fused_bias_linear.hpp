// torch::nn::Linear whose forward is ATen's linear, as PyTorch's nn.Linear calls it: for an input of
// any rank the bias is added inside the GEMM (addmm over the flattened rows). The C++ frontend's
// F::linear does that for 2-D inputs only; for [B, T, d] it runs matmul and then `output += bias`,
// one more pass over every activation (2% of a GPT-small step on the CPU) and a different summation
// order from PyTorch's. Same parameters, names and initialisation as torch::nn::Linear.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace mnddp {

struct FusedBiasLinearImpl : torch::nn::LinearImpl {
  using torch::nn::LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& input) { return at::linear(input, weight, bias); }
};
TORCH_MODULE(FusedBiasLinear);

}  // namespace mnddp
