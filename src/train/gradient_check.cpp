// The non-finite gradient policy.
#include "mnddp/train/gradient_check.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "mnddp/error.hpp"

namespace mnddp {

bool gradients_finite(const std::vector<at::Tensor>& parameters, std::int64_t step, double step_loss,
                      NonfiniteGradients policy, Communicator& control) {
  std::vector<at::Tensor> grads;
  grads.reserve(parameters.size());
  for (const auto& p : parameters) grads.push_back(p.grad());
  if (all_finite(grads)) return true;
  nonfinite_gradients_found(step, step_loss, policy, control);
  return false;
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
