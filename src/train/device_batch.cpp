// Host batch -> device tensors.
#include "mnddp/train/device_batch.hpp"

#include <ATen/ATen.h>

namespace mnddp {
namespace {

at::Tensor on_device(at::Tensor host, c10::Device device) {
  if (device.is_cpu() || !host.defined()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

DeviceBatch to_device(const HostBatch& batch, c10::Device device) {
  DeviceBatch out;
  if (!batch.tokens.empty()) {
    out.x = at::from_blob(const_cast<std::int64_t*>(batch.tokens.data()), batch.shape, at::kLong);
  } else {
    out.x = at::from_blob(const_cast<float*>(batch.x.data()), batch.shape, at::kFloat);
  }
  if (!batch.y.empty()) {
    out.y = at::from_blob(const_cast<std::int64_t*>(batch.y.data()), {batch.size}, at::kLong);
  } else if (!batch.target_shape.empty()) {
    out.y = at::from_blob(const_cast<float*>(batch.targets.data()), batch.target_shape, at::kFloat);
  }
  return {on_device(out.x, device), on_device(out.y, device)};
}

}  // namespace mnddp
