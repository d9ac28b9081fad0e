// NaN/Inf checks over tensors, for the optimizers that look for them in their own pass (FusedSgd,
// FusedAdamW), ZeRO's partition and the trainer's --on-nonfinite policy (train/gradient_check.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace mnddp {

// True when no element of the defined tensors is NaN or Inf. Host tensors are read once, as
// integers (no temporaries, a small fraction of a step); device tensors cost one synchronisation.
bool all_finite(const std::vector<at::Tensor>& tensors);

// Sets `found` (one float on the gradients' device) to 1 where a gradient holds NaN or Inf, 0 else,
// on the device: no host wait (ATen's AMP check, with a scale of 1).
void find_nonfinite(const std::vector<at::Tensor>& grads, at::Tensor& found);

}  // namespace mnddp
