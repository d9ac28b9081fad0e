// Causal self-attention written out, for dropout on the attention probabilities drawn per sample:
// torch's scaled_dot_product_attention draws its dropout from the rank's generator.
#pragma once

#include <ATen/core/Tensor.h>

namespace mnddp {

class SampleDropoutImpl;

// softmax(q k^T / sqrt(d) with the future masked out), then `dropout` on the probabilities
// [B, heads, T, T], then @ v. q, k, v are [B, heads, T, d]; the result is too. Without dropout
// (p = 0 or eval) it equals scaled_dot_product_attention(q, k, v, {}, 0, is_causal=true) up to rounding.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, SampleDropoutImpl& dropout);

}  // namespace mnddp
