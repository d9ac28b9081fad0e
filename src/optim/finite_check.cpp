// NaN/Inf checks over tensors: on the host by bit patterns, on a device by ATen's kernels.
#include "mnddp/optim/finite_check.hpp"

#include <ATen/ATen.h>

#include <map>

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

void find_nonfinite(const std::vector<at::Tensor>& grads, at::Tensor& found) {
  found.zero_();
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;  // the kernel takes one dtype a call
  for (const auto& g : grads)
    if (g.defined()) by_type[g.scalar_type()].push_back(g);
  const at::Tensor one = at::ones({1}, found.options());
  for (auto& [type, list] : by_type) at::_amp_foreach_non_finite_check_and_unscale_(list, found, one);
}

}  // namespace mnddp
