// Internal to train/: the update of a training step on a GPU with no host wait (F5, F6 of the GPU
// review). The verdict on NaN/Inf gradients (the fp16 loss scaler's, or --on-nonfinite's) stays on
// the device and the optimizer's multi-tensor kernels skip a bad step by it; clipping is torch's
// foreach form, whose coefficient never leaves the device; what happened is read once per log
// interval (settle_ledger). The CPU keeps the trainer's immediate checks (a CPU scalar is free).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mnddp {

struct TrainingRun;

// After finalize(): checks, clips, steps (or skips on the device), all-gathers under ZeRO, and
// updates the loss scaler. LARS and LAMB, which have no multi-tensor kernel, read the verdict on the
// host (one wait a step).
void apply_gradients_on_device(TrainingRun& r, std::int64_t step);

// The ledger's figures on the host (one transfer): the interval's loss into the log, a warning for
// skipped steps, and under --on-nonfinite abort the collective Error naming the first bad step.
// Every rank calls it at the same step (a log interval, before a checkpoint's snapshot).
void settle_ledger(TrainingRun& r, std::int64_t step);

// torch.nn.utils.clip_grad_norm_ as PyTorch runs it on a GPU (foreach norms, the coefficient a
// device tensor clamped at 1): no host wait, where LibTorch's C++ one returns the norm as a double.
void clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace mnddp
