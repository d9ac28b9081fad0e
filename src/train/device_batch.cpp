// Host batch -> device tensors.
#include "mnddp/train/device_batch.hpp"

#include <ATen/ATen.h>

namespace mnddp {

DeviceBatch to_device(const HostBatch& batch, c10::Device device) {
  auto x = at::from_blob(const_cast<float*>(batch.x.data()), batch.shape, at::kFloat);
  auto y = at::from_blob(const_cast<std::int64_t*>(batch.y.data()), {batch.size}, at::kLong);
  if (device.is_cpu()) return {x, y};
  return {x.pin_memory().to(device, /*non_blocking=*/true), y.pin_memory().to(device, /*non_blocking=*/true)};
}

}  // namespace mnddp
