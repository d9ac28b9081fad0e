// What the one-pass optimizers (fused_sgd.cpp, fused_adamw.cpp) share: the build of each pass for
// AVX2+FMA beside the baseline, the exponent field that finds NaN/Inf within the pass, and which
// tensors the pass may take.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>

namespace mnddp::fused {

// Each pass is built twice and picked at load time: x86-64-v3 (AVX2, FMA) and the baseline, whose
// std::fma is a library call but gives the same bits. ("arch=haswell" would pick Haswell models only.)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MNDDP_FMA_CLONE __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MNDDP_FMA_CLONE
#endif

// A float's exponent field; the largest over a tensor is all ones (kAllOnes) exactly when it held
// NaN or Inf.
inline constexpr std::uint32_t kAllOnes = 0x7f800000u;
inline std::uint32_t exponent_field(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits & kAllOnes;
}

// Float32 on the host, dense, all laid out alike (a channels-last weight, its gradient and its
// state share strides: element i of one is element i of the others), and no two the same storage.
// Undefined tensors in `others` are left out (state not made yet).
inline bool fusable(const at::Tensor& param, std::initializer_list<const at::Tensor*> others) {
  auto alike = [&](const at::Tensor& t) {
    return t.is_cpu() && t.scalar_type() == at::kFloat && t.is_non_overlapping_and_dense() &&
           t.strides() == param.strides() && t.sizes() == param.sizes();
  };
  if (!alike(param)) return false;
  for (const at::Tensor* t : others) {
    if (!t->defined()) continue;
    if (!alike(*t) || t->is_same(param)) return false;
    for (const at::Tensor* u : others)
      if (u != t && u->defined() && u->is_same(*t)) return false;
  }
  return true;
}

// What torch's optimizers do first in step(): the closure's loss (undefined without one), computed
// with gradients enabled.
inline at::Tensor closure_loss(const std::function<at::Tensor()>& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace mnddp::fused
