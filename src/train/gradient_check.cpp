// The non-finite gradient policy.
#include "mnddp/train/gradient_check.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <map>

#include "mnddp/error.hpp"
#include "mnddp/finite_scan.hpp"

namespace mnddp {
namespace {

bool finite_on_host(const at::Tensor& tensor) {
  // Dense in any order (a channels-last gradient) is read as it lies; only a strided view is copied.
  const at::Tensor t = tensor.is_non_overlapping_and_dense() ? tensor : tensor.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(t.const_data_ptr());
  switch (t.scalar_type()) {
    case at::kFloat:
      return finite_bits<std::uint32_t>(bytes, t.numel(), 0x7f800000u);
    case at::kDouble:
      return finite_bits<std::uint64_t>(bytes, t.numel(), 0x7ff0000000000000u);
    case at::kBFloat16:
      return finite_bits<std::uint16_t>(bytes, t.numel(), 0x7f80u);
    case at::kHalf:
      return finite_bits<std::uint16_t>(bytes, t.numel(), 0x7c00u);
    default:
      return at::isfinite(t).all().item<bool>();
  }
}

}  // namespace

bool all_finite(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> on_device;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    if (t.is_cpu()) {
      if (!finite_on_host(t)) return false;
    } else {
      on_device.push_back(at::isfinite(t).all());
    }
  }
  return on_device.empty() || at::stack(on_device).all().item<bool>();  // one synchronisation
}

bool gradients_finite(const std::vector<at::Tensor>& parameters, std::int64_t step, double step_loss,
                      NonfiniteGradients policy, Communicator& control) {
  std::vector<at::Tensor> grads;
  grads.reserve(parameters.size());
  for (const auto& p : parameters) grads.push_back(p.grad());
  if (all_finite(grads)) return true;
  nonfinite_gradients_found(step, step_loss, policy, control);
  return false;
}

void find_nonfinite(const std::vector<at::Tensor>& grads, at::Tensor& found) {
  found.zero_();
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;  // the kernel takes one dtype a call
  for (const auto& g : grads)
    if (g.defined()) by_type[g.scalar_type()].push_back(g);
  const at::Tensor one = at::ones({1}, found.options());
  for (auto& [type, list] : by_type) at::_amp_foreach_non_finite_check_and_unscale_(list, found, one);
}

void nonfinite_gradients_found(std::int64_t step, double step_loss, NonfiniteGradients policy, Communicator& control,
                               const std::string& afterwards) {
  // Every rank is here (the gradients are the same everywhere): name each rank's loss.
  std::vector<double> losses(static_cast<std::size_t>(control.size()));
  control.allgather(&step_loss, losses.data(), 1, DType::F64);
  std::vector<std::string> parts;
  for (int r = 0; r < control.size(); ++r) parts.push_back(fmt::format("{:.4g} on rank {}", losses[r], r));
  const std::string what =
      fmt::format("step {}: NaN/Inf in the gradients (loss {}){}", step, fmt::join(parts, ", "), afterwards);
  if (policy == NonfiniteGradients::Abort)
    throw Error(what + "; stopping (--on-nonfinite abort; 'skip' skips such steps)", kExitFailure,
                /*collective=*/true);
  if (control.is_root()) spdlog::warn("{}; step skipped (--on-nonfinite skip)", what);
}

}  // namespace mnddp
