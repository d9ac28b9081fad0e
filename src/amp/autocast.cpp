// The autocast scope of the forward pass.
#include "mnddp/amp/autocast.hpp"

#include <ATen/autocast_mode.h>

namespace mnddp {

AutocastScope::AutocastScope(Amp amp, c10::DeviceType device) : device_(device) {
  if (amp == Amp::Off) return;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, amp == Amp::BF16 ? at::kBFloat16 : at::kHalf);
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
  at::autocast::clear_cache();
}

}  // namespace mnddp
