// The Reducer's find_unused_parameters half (PyTorch's reducer does the same): parameters the loss's
// graph does not reach are ready as soon as backward starts, and the ranks vote on which parameters
// no rank used; and finalize() on one rank, which must reach the same outcomes.
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>

#include <unordered_set>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/ddp/reducer.hpp"

namespace mnddp {
namespace {

// Every autograd node reachable from `root` (the loss's graph).
std::unordered_set<const torch::autograd::Node*> reachable_nodes(const at::Tensor& root) {
  std::unordered_set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack;
  if (root.defined() && root.grad_fn()) stack.push_back(root.grad_fn().get());
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    for (const auto& edge : node->next_edges())
      if (edge.function) stack.push_back(edge.function.get());
  }
  return seen;
}

}  // namespace

void Reducer::mark_unreached_ready(const at::Tensor& loss) {
  const auto used = reachable_nodes(loss);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto* accumulator = static_cast<const torch::autograd::Node*>(accumulators_[i].get());
    if (used.count(accumulator) == 0) {
      ready_[i] = true;
      stage_current_gradient(i);  // what earlier no_sync micro-steps accumulated, if anything
    }
  }
}

void Reducer::finalize_alone() {
  stats_ = ReducerStats{};
  std::fill(unused_everywhere_.begin(), unused_everywhere_.end(), false);
  std::size_t missing = 0;
  std::size_t first_missing = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (locally_used_[i]) continue;
    at::Tensor& param = params_[i];
    // The same outcomes as on N ranks: no gradient where no rank used the parameter
    // (find_unused_parameters), else whatever it holds, or zeros.
    if (options_.find_unused_parameters) {
      param.mutable_grad() = at::Tensor();
      unused_everywhere_[i] = true;
      continue;
    }
    if (missing++ == 0) first_missing = i;
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
  }
  if (missing > 0) warn_missing_once(first_missing, missing);
  std::fill(locally_used_.begin(), locally_used_.end(), false);
}

void Reducer::warn_missing_once(std::size_t first, std::size_t count) {
  if (warned_missing_) return;
  warned_missing_ = true;
  spdlog::warn(
      "DDP: parameter '{}' (and {} more) got no gradient in this backward pass; it is averaged as zero. "
      "--find-unused-parameters lets such buckets start during backward",
      names_[first], count - 1);
}

std::vector<bool> Reducer::globally_unused() {
  {
    at::NoGradGuard no_grad;
    // Pinned, so that the copy to a device map is queued, not waited for.
    at::Tensor local = at::empty({static_cast<std::int64_t>(params_.size())},
                                 at::TensorOptions().dtype(at::kInt).pinned_memory(used_map_.is_cuda()));
    auto* flags = local.data_ptr<std::int32_t>();
    for (std::size_t i = 0; i < params_.size(); ++i) flags[i] = locally_used_[i] ? 1 : 0;
    used_map_.copy_(local, /*non_blocking=*/true);
  }
  const CollectiveLabel label("unused-parameter map");
  allreduce(comm_, used_map_, ReduceOp::Max);
  // The step's one host wait under --find-unused-parameters (PyTorch's reducer has it too): which
  // gradients to drop is decided on the host.
  const at::Tensor global = used_map_.to(at::kCPU);
  const auto* used = global.data_ptr<std::int32_t>();
  std::vector<bool> unused(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) unused[i] = used[i] == 0;
  return unused;
}

}  // namespace mnddp
