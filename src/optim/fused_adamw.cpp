// The one-pass AdamW update (see the header), torch/csrc/api/src/optim/adamw.cpp element by element.
#include "mnddp/optim/fused_adamw.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

#include "fused_pass.hpp"
#include "mnddp/optim/finite_check.hpp"
#include "multi_tensor_step.hpp"

namespace mnddp {
namespace {

struct AdamWScalars {
  float decay;         // 1 - lr * weight_decay (torch's mul_ takes it as a float)
  float beta1, rest1;  // beta1, 1 - beta1
  float beta2, rest2;  // beta2, 1 - beta2
  float sqrt_bc2;      // sqrt(1 - beta2^t)
  float eps;
  float neg_step;  // -lr / (1 - beta1^t)
};

// Torch's AdamW::step per element (g: the gradient, m, v: the moments), as its kernels compute:
//   p.mul_(1 - lr wd)                       -> p * decay
//   m.mul_(b1).add_(g, 1 - b1)              -> fma(g, 1 - b1, m * b1)   (add with alpha: an FMA)
//   v.mul_(b2).addcmul_(g, g, 1 - b2)       -> fma((1 - b2) * g, g, v * b2)
//   d = (v.sqrt() / sqrt(bc2)).add_(eps)    -> root / sqrt_bc2 + eps, root = torch's sqrt of v
//   p.addcdiv_(m, d, -step)                 -> p + (-step * m) / d
// Torch's float sqrt is not the correctly rounded one (MKL's vsSqrt in its high-accuracy mode, 1 ulp
// off on about 0.6% of values), so the pass leaves the root to at::sqrt_out between its halves.
// moments() returns the largest exponent field among the gradients.
template <bool kDecay>
[[gnu::always_inline]] inline std::uint32_t moments_elements(float* __restrict p, const float* __restrict g,
                                                             float* __restrict m, float* __restrict v, std::int64_t n,
                                                             const AdamWScalars& s) {
  std::uint32_t worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    worst = std::max(worst, fused::exponent_field(gi));
    if constexpr (kDecay) p[i] = p[i] * s.decay;
    m[i] = std::fma(gi, s.rest1, m[i] * s.beta1);
    v[i] = std::fma(s.rest2 * gi, gi, v[i] * s.beta2);
  }
  return worst;
}

template <bool kDecay>
MNDDP_FMA_CLONE std::uint32_t moments(float* p, const float* g, float* m, float* v, std::int64_t n,
                                      const AdamWScalars& s) {
  // Fixed-size blocks, so that -O2 vectorises the body (the tensors never overlap: fused::fusable).
  constexpr std::int64_t kVector = 256;
  std::uint32_t worst = 0;
  std::int64_t i = 0;
  for (; i + kVector <= n; i += kVector)
    worst = std::max(worst, moments_elements<kDecay>(p + i, g + i, m + i, v + i, kVector, s));
  return std::max(worst, moments_elements<kDecay>(p + i, g + i, m + i, v + i, n - i, s));
}

[[gnu::always_inline]] inline void update_elements(float* __restrict p, const float* __restrict m,
                                                   const float* __restrict root, std::int64_t n,
                                                   const AdamWScalars& s) {
  for (std::int64_t i = 0; i < n; ++i) p[i] = p[i] + (s.neg_step * m[i]) / (root[i] / s.sqrt_bc2 + s.eps);
}

MNDDP_FMA_CLONE void update(float* p, const float* m, const float* root, std::int64_t n, const AdamWScalars& s) {
  constexpr std::int64_t kVector = 256;
  std::int64_t i = 0;
  for (; i + kVector <= n; i += kVector) update_elements(p + i, m + i, root + i, kVector, s);
  update_elements(p + i, m + i, root + i, n - i, s);
}

// The update of one tensor, in pieces that stay in the cache between the three passes (moments,
// torch's root, update): 16384 values, 64 KB per array.
std::uint32_t adamw_pass(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s,
                         at::Tensor& scratch) {
  constexpr std::int64_t kPiece = 16384;
  if (scratch.numel() < std::min(n, kPiece)) scratch = at::empty({std::min(n, kPiece)}, at::kFloat);
  auto* moments_of = s.decay != 1.0f ? &moments<true> : &moments<false>;
  std::uint32_t worst = 0;
  for (std::int64_t i = 0; i < n; i += kPiece) {
    const std::int64_t len = std::min(kPiece, n - i);
    worst = std::max(worst, moments_of(p + i, g + i, m + i, v + i, len, s));
    at::Tensor root = scratch.narrow(0, 0, len);
    at::sqrt_out(root, at::from_blob(v + i, {len}, at::kFloat));
    update(p + i, m + i, root.const_data_ptr<float>(), len, s);
  }
  return worst;
}

}  // namespace

torch::optim::AdamWParamState& FusedAdamW::state_of(const at::Tensor& param, bool amsgrad) {
  auto& slot = state_[param.unsafeGetTensorImpl()];
  if (slot == nullptr) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(0);
    state->exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
    state->exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    if (amsgrad) state->max_exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    slot = std::move(state);
  }
  return static_cast<torch::optim::AdamWParamState&>(*slot);
}

at::Tensor& FusedAdamW::device_step(const at::Tensor& param, torch::optim::AdamWParamState& state) {
  DeviceStep& entry = device_steps_[param.unsafeGetTensorImpl()];
  // A replaced state (a resume) is another object with other moment tensors: an address alone could
  // be reused by the new object.
  const void* moments = state.exp_avg().unsafeGetTensorImpl();
  if (entry.owner != &state || entry.moments != moments || !entry.count.defined()) {
    entry.owner = &state;
    entry.moments = moments;
    entry.count = at::full({}, static_cast<double>(state.step()), param.options().dtype(at::kFloat));
  }
  return entry.count;
}

at::Tensor FusedAdamW::step(LossClosure closure) { return run(closure, std::nullopt); }

void FusedAdamW::step_unless(const at::Tensor& skip) { run(nullptr, skip); }

bool FusedAdamW::gates_on_device() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto found = state_.find(p.unsafeGetTensorImpl());
      at::Tensor exp_avg, exp_avg_sq;  // undefined before the first step (made alike then)
      if (found != state_.end()) {
        const auto& state = static_cast<const torch::optim::AdamWParamState&>(*found->second);
        exp_avg = state.exp_avg();
        exp_avg_sq = state.exp_avg_sq();
      }
      if (!takes_kernels(p) || !multi_tensor::alike(p, {&p.grad(), &exp_avg, &exp_avg_sq})) return false;
    }
  }
  return true;
}

void FusedAdamW::sync_state_to_host() {
  if (!host_steps_stale_) return;
  std::vector<torch::optim::AdamWParamState*> states;
  std::vector<at::Tensor> counts;
  for (const auto& [impl, entry] : device_steps_) {
    const auto found = state_.find(impl);
    if (found == state_.end() || found->second.get() != entry.owner ||
        static_cast<torch::optim::AdamWParamState&>(*found->second).exp_avg().unsafeGetTensorImpl() != entry.moments)
      continue;  // replaced since
    states.push_back(static_cast<torch::optim::AdamWParamState*>(found->second.get()));
    counts.push_back(entry.count.to(at::kDouble).reshape({1}));
  }
  if (!counts.empty()) {
    const at::Tensor host = at::cat(counts).to(at::kCPU);  // one transfer
    const auto* values = host.const_data_ptr<double>();
    for (std::size_t i = 0; i < states.size(); ++i) states[i]->step(static_cast<std::int64_t>(values[i]));
  }
  host_steps_stale_ = false;
}

at::Tensor FusedAdamW::run(const LossClosure& closure, const std::optional<at::Tensor>& skip) {
  const at::Tensor loss = fused::closure_loss(closure);
  at::NoGradGuard no_grad;
  nonfinite_seen_ = false;
  if (skip) host_steps_stale_ = true;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const auto [beta1, beta2] = options.betas();
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;  // the multi-tensor kernel's
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& grad = p.grad();
      TORCH_CHECK(!grad.is_sparse(), "AdamW does not support sparse gradients");
      auto& state = state_of(p, options.amsgrad());
      if (!options.amsgrad() && takes_kernels(p) &&
          multi_tensor::alike(p, {&grad, &state.exp_avg(), &state.exp_avg_sq()})) {
        steps.push_back(device_step(p, state));
        if (!skip) state.step(state.step() + 1);  // the host's count follows the kernel's
        params.push_back(p);
        grads.push_back(grad);
        exp_avgs.push_back(state.exp_avg());
        exp_avg_sqs.push_back(state.exp_avg_sq());
        continue;
      }
      if (skip) throw std::logic_error("FusedAdamW::step_unless: a parameter the multi-tensor kernel cannot take");
      state.step(state.step() + 1);
      const double bias_correction1 = 1 - std::pow(beta1, state.step());
      const double bias_correction2 = 1 - std::pow(beta2, state.step());
      const double step_size = options.lr() / bias_correction1;
      at::Tensor& exp_avg = state.exp_avg();
      at::Tensor& exp_avg_sq = state.exp_avg_sq();
      if (!options.amsgrad() && fused::fusable(p, {&grad, &exp_avg, &exp_avg_sq})) {
        const AdamWScalars scalars{static_cast<float>(1 - options.lr() * options.weight_decay()),
                                   static_cast<float>(beta1),
                                   static_cast<float>(1 - beta1),
                                   static_cast<float>(beta2),
                                   static_cast<float>(1 - beta2),
                                   static_cast<float>(std::sqrt(bias_correction2)),
                                   static_cast<float>(options.eps()),
                                   static_cast<float>(-step_size)};
        const std::uint32_t worst =
            adamw_pass(p.data_ptr<float>(), grad.const_data_ptr<float>(), exp_avg.data_ptr<float>(),
                       exp_avg_sq.data_ptr<float>(), p.numel(), scalars, scratch_);
        if (worst == fused::kAllOnes) nonfinite_seen_ = true;
        continue;
      }
      // torch's own operations, for what neither path takes. Host gradients are checked here too; a
      // device one would cost a synchronisation each.
      if (grad.is_cpu() && !all_finite({grad})) nonfinite_seen_ = true;
      if (options.weight_decay() != 0) p.mul_(1 - options.lr() * options.weight_decay());
      exp_avg.mul_(beta1).add_(grad, 1 - beta1);
      exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      at::Tensor denom;
      if (options.amsgrad()) {
        at::max_out(state.max_exp_avg_sq(), exp_avg_sq, state.max_exp_avg_sq());
        denom = (state.max_exp_avg_sq().sqrt() / std::sqrt(bias_correction2)).add_(options.eps());
      } else {
        denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(options.eps());
      }
      p.addcdiv_(exp_avg, denom, -step_size);
    }
    if (!params.empty()) multi_tensor::adamw(params, grads, exp_avgs, exp_avg_sqs, steps, options, skip);
  }
  return loss;
}

}  // namespace mnddp
