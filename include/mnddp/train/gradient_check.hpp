// --on-nonfinite: what a step whose gradients hold NaN/Inf does when the fp16 loss scaler (which
// always skips such steps) is off. The gradients are all-reduced, so identical on every rank: every
// rank reaches the same verdict without communicating, and only a bad step costs an all-gather.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/optim/finite_check.hpp"

namespace mnddp {

// True when every gradient is finite (all_finite). Otherwise: Abort throws one collective Error naming the step
// and every rank's loss; Skip warns (rank 0) and returns false, and the caller skips the step.
bool gradients_finite(const std::vector<at::Tensor>& parameters, std::int64_t step, double step_loss,
                      NonfiniteGradients policy, Communicator& control);

// The verdict once NaN/Inf was found (by gradients_finite, or by the optimizer's own pass: FusedSgd):
// Abort throws the collective Error, Skip warns on rank 0. Every rank must call it. `afterwards`: what
// followed, when the verdict is read later than the step (on a GPU, at the log interval).
void nonfinite_gradients_found(std::int64_t step, double step_loss, NonfiniteGradients policy, Communicator& control,
                               const std::string& afterwards = "");

}  // namespace mnddp
