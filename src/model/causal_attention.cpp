// Causal self-attention as nanoGPT's slow path computes it, with a SampleDropout on the probabilities.
#include "mnddp/model/causal_attention.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "mnddp/model/sample_randomness.hpp"

namespace mnddp {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, SampleDropoutImpl& dropout) {
  const auto length = q.size(-2);
  // q scaled before the product, as SDPA's math path does: under fp16 q·k could overflow first.
  const at::Tensor scores = at::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), k.transpose(-2, -1));
  const at::Tensor future = at::ones({length, length}, q.options().dtype(at::kBool)).triu_(1);
  const at::Tensor probabilities =
      at::softmax(scores.masked_fill_(future, -std::numeric_limits<double>::infinity()), -1);
  return at::matmul(dropout.forward(probabilities), v);
}

}  // namespace mnddp
