// A loader batch as tensors on the rank's device.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "mnddp/data/loader.hpp"

namespace mnddp {

struct DeviceBatch {
  at::Tensor x;  // float32 inputs [N, sample_shape...], or int64 token ids [N, T]
  at::Tensor y;  // int64 class labels [N], float32 targets [N, label_shape...], or undefined (tokens)
};

// On the CPU the tensors borrow the batch's memory (no copy): keep `batch` alive until backward is
// done. On a GPU the batch goes through pinned memory, so the copy to the device is asynchronous and
// overlaps with work already queued on the stream.
DeviceBatch to_device(const HostBatch& batch, c10::Device device);

}  // namespace mnddp
