// The one-pass SGD update (see the header). Every fused multiply-add is an explicit std::fma where
// torch's kernel has one (its add with alpha is an FMA in the vector and the scalar loop alike); the
// one plain product (b * m) feeds an fma, so the compiler has no a * b + c left to contract.
#include "mnddp/optim/fused_sgd.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

#include "fused_pass.hpp"
#include "mnddp/optim/finite_check.hpp"
#include "multi_tensor_step.hpp"

namespace mnddp {
namespace {

struct SgdScalars {
  float weight_decay;
  float momentum;
  float dampened;  // 1 - dampening, as torch's add_ takes its alpha: converted to float
  float step;      // -lr
};

// Torch's SGD::step per element (g: the gradient, b: the momentum buffer), as its kernels compute:
//   d = g.add(p, wd)          -> fma(p, wd, g)
//   b = clone(d)              (first step)   or   b = b.mul_(m).add_(d, 1 - dampening) -> fma(d, 1 - dampening, b * m)
//   d = d.add(b, m)           (nesterov)     -> fma(b, m, d);   else d = b
//   p.add_(d, -lr)            -> fma(d, -lr, p)
// Returns the largest exponent field among the gradients (all ones: one was NaN/Inf).
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
[[gnu::always_inline]] inline std::uint32_t sgd_elements(float* __restrict p, const float* __restrict g,
                                                         float* __restrict b, std::int64_t n, SgdScalars s) {
  std::uint32_t worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    worst = std::max(worst, fused::exponent_field(gi));
    float d = kDecay ? std::fma(p[i], s.weight_decay, gi) : gi;
    if constexpr (kMomentum) {
      const float bi = kFirst ? d : std::fma(d, s.dampened, b[i] * s.momentum);
      b[i] = bi;
      d = kNesterov ? std::fma(bi, s.momentum, d) : bi;
    }
    p[i] = std::fma(d, s.step, p[i]);
  }
  return worst;
}

template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
MNDDP_FMA_CLONE std::uint32_t sgd_pass(float* p, const float* g, float* b, std::int64_t n, SgdScalars s) {
  // Fixed-size blocks, so that -O2 vectorises the body (the tensors never overlap: fused::fusable).
  constexpr std::int64_t kBlock = 256;
  std::uint32_t worst = 0;
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    worst = std::max(
        worst, sgd_elements<kDecay, kMomentum, kFirst, kNesterov>(p + i, g + i, kMomentum ? b + i : b, kBlock, s));
  return std::max(worst,
                  sgd_elements<kDecay, kMomentum, kFirst, kNesterov>(p + i, g + i, kMomentum ? b + i : b, n - i, s));
}

using Pass = std::uint32_t (*)(float*, const float*, float*, std::int64_t, SgdScalars);

template <bool kDecay, bool kMomentum>
Pass pick(bool first, bool nesterov) {
  if (!kMomentum) return &sgd_pass<kDecay, false, false, false>;
  if (first) return nesterov ? &sgd_pass<kDecay, true, true, true> : &sgd_pass<kDecay, true, true, false>;
  return nesterov ? &sgd_pass<kDecay, true, false, true> : &sgd_pass<kDecay, true, false, false>;
}

}  // namespace

at::Tensor FusedSgd::keep_momentum_buffer(const at::Tensor& param, at::Tensor buffer) {
  auto state = std::make_unique<torch::optim::SGDParamState>();
  state->momentum_buffer(buffer);
  state_[param.unsafeGetTensorImpl()] = std::move(state);
  return buffer;
}

at::Tensor FusedSgd::step(LossClosure closure) { return run(closure, std::nullopt); }

void FusedSgd::step_unless(const at::Tensor& skip) { run(nullptr, skip); }

bool FusedSgd::gates_on_device() const {
  for (const auto& group : param_groups_)
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto found = state_.find(p.unsafeGetTensorImpl());
      at::Tensor buffer;
      if (found != state_.end())
        buffer = static_cast<const torch::optim::SGDParamState&>(*found->second).momentum_buffer();
      if (!takes_kernels(p) || !multi_tensor::alike(p, {&p.grad(), &buffer})) return false;
    }
  return true;
}

at::Tensor FusedSgd::run(const LossClosure& closure, const std::optional<at::Tensor>& skip) {
  const at::Tensor loss = fused::closure_loss(closure);
  at::NoGradGuard no_grad;
  nonfinite_seen_ = false;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    const double weight_decay = options.weight_decay();
    const double momentum = options.momentum();
    const SgdScalars scalars{static_cast<float>(weight_decay), static_cast<float>(momentum),
                             static_cast<float>(1 - options.dampening()), static_cast<float>(-1 * options.lr())};
    // The multi-tensor kernel's lists: parameters on their first step (no buffer yet) and the rest.
    struct Lists {
      std::vector<at::Tensor> params, grads, buffers;
    } first_lists, later_lists;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& grad = p.grad();
      auto found = state_.find(p.unsafeGetTensorImpl());
      const bool first = found == state_.end();
      at::Tensor buffer;
      if (momentum != 0 && !first) buffer = static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer();
      if (takes_kernels(p) && multi_tensor::alike(p, {&grad, &buffer})) {
        // A first step's buffer starts at zero: the kernel's first step overwrites it with the update's
        // gradient, and a skipped one leaves zeros, which the next step's m * 0 + (1 - dampening) g
        // makes g (mnddp's SGD has no dampening; torch's fused SGD leaves garbage there instead).
        if (momentum != 0 && first) buffer = keep_momentum_buffer(p, at::zeros_like(p, at::MemoryFormat::Preserve));
        Lists& lists = first ? first_lists : later_lists;
        lists.params.push_back(p);
        lists.grads.push_back(grad);
        if (momentum != 0) lists.buffers.push_back(buffer);
        continue;
      }
      if (skip) throw std::logic_error("FusedSgd::step_unless: a parameter the multi-tensor kernel cannot take");
      if (fused::fusable(p, {&grad, &buffer})) {
        if (momentum != 0 && first) buffer = keep_momentum_buffer(p, at::empty_like(p));  // the pass writes it
        const Pass pass = weight_decay != 0 ? (momentum != 0 ? pick<true, true>(first, options.nesterov())
                                                             : pick<true, false>(first, options.nesterov()))
                                            : (momentum != 0 ? pick<false, true>(first, options.nesterov())
                                                             : pick<false, false>(first, options.nesterov()));
        const std::uint32_t worst = pass(p.data_ptr<float>(), grad.const_data_ptr<float>(),
                                         buffer.defined() ? buffer.data_ptr<float>() : nullptr, p.numel(), scalars);
        if (worst == fused::kAllOnes) nonfinite_seen_ = true;
        continue;
      }
      // torch's own operations (torch/csrc/api/src/optim/sgd.cpp), for what neither path takes.
      // Host gradients are checked here too; a device one would cost a synchronisation each.
      if (grad.is_cpu() && !all_finite({grad})) nonfinite_seen_ = true;
      at::Tensor d = grad;
      if (weight_decay != 0) d = d.add(p, weight_decay);
      if (momentum != 0) {
        if (first) {
          buffer = keep_momentum_buffer(p, at::clone(d).detach());
        } else {
          buffer.mul_(momentum).add_(d, 1 - options.dampening());
        }
        d = options.nesterov() ? d.add(buffer, momentum) : buffer;
      }
      p.add_(d, -1 * options.lr());
    }
    if (!first_lists.params.empty())  // without momentum there is no first step to speak of
      multi_tensor::sgd(first_lists.params, first_lists.grads, first_lists.buffers, options, momentum != 0, skip);
    if (!later_lists.params.empty())
      multi_tensor::sgd(later_lists.params, later_lists.grads, later_lists.buffers, options, false, skip);
  }
  return loss;
}

}  // namespace mnddp
