// ZeRO's optimizer state to and from whole per-parameter arrays, the checkpoint's layout at every
// --zero and world size: a bucket's chunks are all-gathered one bucket at a time (a bucket's worth of
// memory, never the whole state), and a rank takes its pieces out of whole arrays on resume.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"
#include "mnddp/train/lamb.hpp"
#include "mnddp/train/lars.hpp"
#include "mnddp/zero/zero_partition.hpp"

namespace mnddp {
namespace {

bool has_step_count(OptimizerKind kind) { return kind == OptimizerKind::AdamW || kind == OptimizerKind::Lamb; }

std::vector<std::string> state_fields(OptimizerKind kind) {
  if (has_step_count(kind)) return {"exp_avg", "exp_avg_sq"};
  return {"momentum_buffer"};
}

// The named tensor field of one parameter's state (undefined when it has none yet).
at::Tensor& field_of(torch::optim::OptimizerParamState& state, OptimizerKind kind, const std::string& field) {
  switch (kind) {
    case OptimizerKind::Sgd:
      return static_cast<torch::optim::SGDParamState&>(state).momentum_buffer();
    case OptimizerKind::Lars:
      return static_cast<LarsParamState&>(state).momentum_buffer();
    case OptimizerKind::AdamW: {
      auto& adamw = static_cast<torch::optim::AdamWParamState&>(state);
      return field == "exp_avg" ? adamw.exp_avg() : adamw.exp_avg_sq();
    }
    case OptimizerKind::Lamb: {
      auto& lamb = static_cast<LambParamState&>(state);
      return field == "exp_avg" ? lamb.exp_avg() : lamb.exp_avg_sq();
    }
  }
  throw std::logic_error("field_of: unknown optimizer kind");
}

std::int64_t step_of(torch::optim::OptimizerParamState& state, OptimizerKind kind) {
  if (kind == OptimizerKind::AdamW) return static_cast<torch::optim::AdamWParamState&>(state).step();
  if (kind == OptimizerKind::Lamb) return static_cast<LambParamState&>(state).step();
  return 1;
}

std::unique_ptr<torch::optim::OptimizerParamState> fresh_state(OptimizerKind kind, std::int64_t step) {
  switch (kind) {
    case OptimizerKind::Sgd:
      return std::make_unique<torch::optim::SGDParamState>();
    case OptimizerKind::Lars:
      return std::make_unique<LarsParamState>();
    case OptimizerKind::AdamW: {
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(step);
      return state;
    }
    case OptimizerKind::Lamb: {
      auto state = std::make_unique<LambParamState>();
      state->step(step);
      return state;
    }
  }
  throw std::logic_error("fresh_state: unknown optimizer kind");
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> ZeroPartition::gather_state(OptimizerKind kind) {
  at::NoGradGuard no_grad;
  const auto& params = reducer_.parameters();
  auto& states = optimizer_->state();
  auto state_of = [&](std::size_t k) -> torch::optim::OptimizerParamState* {
    const auto found = states.find(pieces_[k].unsafeGetTensorImpl());
    return found == states.end() ? nullptr : found->second.get();
  };
  // Which parameters have state, and their step counts: the most any rank's piece has (a rank may
  // own no piece of a parameter). 0: none yet, so no array, as --zero 0 writes none.
  at::Tensor steps = at::zeros({static_cast<std::int64_t>(params.size())}, at::kLong);
  auto* step_values = steps.data_ptr<std::int64_t>();
  for (std::size_t k = 0; k < owned_.size(); ++k) {
    auto* state = state_of(k);
    if (state != nullptr && field_of(*state, kind, state_fields(kind).front()).defined())
      step_values[owned_[k].param] = std::max(step_values[owned_[k].param], step_of(*state, kind));
  }
  at::Tensor agreed = steps.to(params.front().device());
  {
    const CollectiveLabel label("ZeRO optimizer-state steps");
    allreduce(comm_, agreed, ReduceOp::Max);
  }
  steps = agreed.to(at::kCPU);
  step_values = steps.data_ptr<std::int64_t>();

  std::vector<std::pair<std::string, at::Tensor>> arrays;
  for (const std::string& field : state_fields(kind)) {
    for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
      at::Tensor buffer = bucket_buffer(b);
      buffer.zero_();
      at::Tensor mine = buffer.narrow(0, layout_.chunk(b) * comm_.rank(), layout_.chunk(b));
      for (std::size_t k = 0; k < owned_.size(); ++k) {
        auto* state = owned_[k].bucket == b ? state_of(k) : nullptr;
        if (state != nullptr && field_of(*state, kind, field).defined())
          mine.narrow(0, owned_[k].chunk_offset, owned_[k].length).copy_(field_of(*state, kind, field));
      }
      {
        const CollectiveLabel label(fmt::format("ZeRO optimizer-state all-gather, bucket {}", b));
        allgather_in_place(comm_, buffer);
      }
      for (std::size_t i : reducer_.bucket_members()[b]) {
        if (step_values[i] == 0) continue;
        const at::Tensor& param = params[i];
        // The slot is in the parameter's memory order; the array is its logical shape.
        const at::Tensor whole = buffer.narrow(0, layout_.offset_in_bucket(i), param.numel())
                                     .as_strided(param.sizes(), param.strides())
                                     .to(at::kCPU)
                                     .contiguous()
                                     .clone();
        arrays.emplace_back(fmt::format("optimizer/{}/{}", reducer_.names()[i], field), whole);
      }
    }
  }
  if (has_step_count(kind))
    for (std::size_t i = 0; i < params.size(); ++i)
      if (step_values[i] > 0)
        arrays.emplace_back(fmt::format("optimizer/{}/step", reducer_.names()[i]),
                            at::scalar_tensor(step_values[i], at::kLong));
  return arrays;
}

void ZeroPartition::scatter_state(OptimizerKind kind, const Fetch& fetch) {
  at::NoGradGuard no_grad;
  const auto& params = reducer_.parameters();
  auto& states = optimizer_->state();
  states.clear();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& param = params[i];
    const std::string prefix = fmt::format("optimizer/{}/", reducer_.names()[i]);
    auto whole = [&](const std::string& field) -> std::optional<at::Tensor> {
      auto array = fetch(prefix + field);
      if (array && array->sizes() != param.sizes())
        throw UsageError(fmt::format("checkpoint: '{}{}' has shape [{}] but the model has [{}]", prefix, field,
                                     fmt::join(array->sizes(), ", "), fmt::join(param.sizes(), ", ")));
      return array;
    };
    const auto fields = state_fields(kind);
    std::vector<at::Tensor> arrays;
    for (const std::string& field : fields) {
      auto array = whole(field);
      if (!array) {
        if (!arrays.empty()) throw UsageError(fmt::format("checkpoint: '{}{}' is missing", prefix, field));
        break;
      }
      // In the parameter's layout and on its device, so that a piece is a range of its memory order.
      at::Tensor laid = at::empty_like(param, at::MemoryFormat::Preserve).copy_(*array);
      arrays.push_back(laid.as_strided({param.numel()}, {1}, 0));
    }
    if (arrays.empty()) continue;  // no step taken yet for this parameter
    std::int64_t step = 1;
    if (has_step_count(kind)) {
      auto count = fetch(prefix + "step");
      if (!count) throw UsageError(fmt::format("checkpoint: '{}step' is missing", prefix));
      step = count->item<std::int64_t>();
    }
    for (std::size_t k : pieces_of_param_[i]) {
      auto state = fresh_state(kind, step);
      for (std::size_t f = 0; f < fields.size(); ++f)
        field_of(*state, kind, fields[f]) = arrays[f].narrow(0, owned_[k].param_offset, owned_[k].length).clone();
      states[pieces_[k].unsafeGetTensorImpl()] = std::move(state);
    }
  }
}

}  // namespace mnddp
