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
#include "mnddp/optim/device_gated_optimizer.hpp"
#include "mnddp/optim/lamb.hpp"
#include "mnddp/optim/lars.hpp"
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

torch::optim::OptimizerParamState* ZeroPartition::state_of_piece(std::size_t k) {
  auto& states = optimizer_->state();
  const auto found = states.find(pieces_[k].unsafeGetTensorImpl());
  return found == states.end() ? nullptr : found->second.get();
}

std::vector<std::int64_t> ZeroPartition::agreed_steps(OptimizerKind kind) {
  if (auto* gated = dynamic_cast<DeviceGatedOptimizer*>(optimizer_)) gated->sync_state_to_host();
  const auto& params = reducer_.parameters();
  at::Tensor steps = at::zeros({static_cast<std::int64_t>(params.size())}, at::kLong);
  auto* values = steps.data_ptr<std::int64_t>();
  for (std::size_t k = 0; k < owned_.size(); ++k) {
    auto* state = state_of_piece(k);
    if (state != nullptr && field_of(*state, kind, state_fields(kind).front()).defined())
      values[owned_[k].param] = std::max(values[owned_[k].param], step_of(*state, kind));
  }
  // A rank may own no piece of a parameter: the most any rank has. 0: no state yet (no array, as
  // --zero 0 writes none).
  at::Tensor agreed = steps.to(params.front().device());
  {
    const CollectiveLabel label("ZeRO optimizer-state steps");
    allreduce(comm_, agreed, ReduceOp::Max);
  }
  steps = agreed.to(at::kCPU);
  return {steps.data_ptr<std::int64_t>(), steps.data_ptr<std::int64_t>() + steps.numel()};
}

std::vector<std::pair<std::string, at::Tensor>> ZeroPartition::gather_state(OptimizerKind kind) {
  at::NoGradGuard no_grad;
  const std::vector<std::int64_t> steps = agreed_steps(kind);
  auto arrays = gather_state_of(kind, std::vector<bool>(steps.size(), true), steps);
  if (has_step_count(kind))
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (steps[i] > 0)
        arrays.emplace_back(fmt::format("optimizer/{}/step", reducer_.names()[i]),
                            at::scalar_tensor(steps[i], at::kLong));
  return arrays;
}

std::vector<std::pair<std::string, at::Tensor>> ZeroPartition::gather_state_of(OptimizerKind kind,
                                                                               const std::vector<bool>& wanted,
                                                                               const std::vector<std::int64_t>& steps) {
  const auto& params = reducer_.parameters();
  std::vector<std::pair<std::string, at::Tensor>> arrays;
  for (const std::string& field : state_fields(kind)) {
    for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
      const auto& members = reducer_.bucket_members()[b];
      if (std::none_of(members.begin(), members.end(), [&](std::size_t i) { return wanted[i] && steps[i] > 0; }))
        continue;  // the same on every rank: nothing of this bucket to gather
      at::Tensor buffer = bucket_buffer(b);
      buffer.zero_();
      at::Tensor mine = buffer.narrow(0, layout_.chunk(b) * comm_.rank(), layout_.chunk(b));
      for (std::size_t k = 0; k < owned_.size(); ++k) {
        auto* state = owned_[k].bucket == b ? state_of_piece(k) : nullptr;
        if (state != nullptr && field_of(*state, kind, field).defined())
          mine.narrow(0, owned_[k].chunk_offset, owned_[k].length).copy_(field_of(*state, kind, field));
      }
      {
        const CollectiveLabel label(fmt::format("ZeRO optimizer-state all-gather, bucket {}", b));
        allgather_in_place(comm_, buffer);
      }
      for (std::size_t i : members) {
        if (!wanted[i] || steps[i] == 0) continue;
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
  return arrays;
}

ShardedOptimizerState::ForCheckpoint ZeroPartition::for_checkpoint(OptimizerKind kind) {
  at::NoGradGuard no_grad;
  const auto& params = reducer_.parameters();
  const std::vector<std::int64_t> steps = agreed_steps(kind);
  // A dense parameter's memory order is the array's C order, so a piece is a range of the array.
  std::vector<bool> laid_otherwise(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) laid_otherwise[i] = !params[i].is_contiguous();
  ForCheckpoint out;
  out.whole = gather_state_of(kind, laid_otherwise, steps);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (laid_otherwise[i] || steps[i] == 0) continue;
    for (const std::string& field : state_fields(kind)) {
      Share share{fmt::format("optimizer/{}/{}", reducer_.names()[i], field),
                  std::vector<std::int64_t>(params[i].sizes().begin(), params[i].sizes().end()), 0,
                  at::empty({0}, params[i].options().device(at::kCPU))};
      for (std::size_t k : pieces_of_param_[i]) {
        auto* state = state_of_piece(k);
        if (state == nullptr || !field_of(*state, kind, field).defined()) continue;
        share.first = owned_[k].param_offset;
        share.values = field_of(*state, kind, field).to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
      }
      out.shares.push_back(std::move(share));
    }
  }
  if (has_step_count(kind))
    for (std::size_t i = 0; i < params.size(); ++i)
      if (steps[i] > 0)
        out.whole.emplace_back(fmt::format("optimizer/{}/step", reducer_.names()[i]),
                               at::scalar_tensor(steps[i], at::kLong));
  return out;
}

void ZeroPartition::restore_pieces(OptimizerKind kind, std::size_t param, std::int64_t step,
                                   const std::vector<std::vector<at::Tensor>>& fields) {
  const auto names = state_fields(kind);
  const auto& pieces = pieces_of_param_[param];
  for (std::size_t n = 0; n < pieces.size(); ++n) {
    auto state = fresh_state(kind, step);
    for (std::size_t f = 0; f < names.size(); ++f) field_of(*state, kind, names[f]) = fields[f][n];
    optimizer_->state()[pieces_[pieces[n]].unsafeGetTensorImpl()] = std::move(state);
  }
}

void ZeroPartition::restore(OptimizerKind kind, const Source& source) {
  at::NoGradGuard no_grad;
  const auto& params = reducer_.parameters();
  optimizer_->state().clear();
  const auto names = state_fields(kind);
  // First everything collective, the same on every rank: whole arrays (parameters laid out otherwise,
  // step counts). Then this rank's own reads, which involve no other rank: a failure there cannot
  // leave another rank waiting in a collective (the caller agrees on it).
  std::vector<std::int64_t> steps(params.size(), 0);  // 0: no state (or restored already)
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string prefix = fmt::format("optimizer/{}/", reducer_.names()[i]);
    if (!params[i].is_contiguous()) {
      scatter_one(kind, i, source.whole);
      continue;
    }
    if (!source.has(prefix + names.front())) continue;  // no step taken yet (the same file everywhere)
    steps[i] = 1;
    if (!has_step_count(kind)) continue;
    auto count = source.whole(prefix + "step");
    if (!count) throw UsageError(fmt::format("checkpoint: '{}step' is missing", prefix));
    steps[i] = count->item<std::int64_t>();
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (steps[i] == 0) continue;
    const std::string prefix = fmt::format("optimizer/{}/", reducer_.names()[i]);
    std::vector<std::vector<at::Tensor>> fields(names.size());
    for (std::size_t f = 0; f < names.size(); ++f)
      for (std::size_t k : pieces_of_param_[i])
        fields[f].push_back(source.share(prefix + names[f], owned_[k].param_offset, owned_[k].length, params[i].sizes())
                                .to(params[i].device()));
    restore_pieces(kind, i, steps[i], fields);
  }
}

std::vector<std::string> ZeroPartition::parameters_read_in_pieces() const {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < reducer_.parameters().size(); ++i)
    if (reducer_.parameters()[i].is_contiguous()) names.push_back(reducer_.names()[i]);
  return names;
}

void ZeroPartition::read_parameter_pieces(const Source& source) {
  at::NoGradGuard no_grad;
  const auto& params = reducer_.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].is_contiguous()) continue;
    const std::string name = "model/" + reducer_.names()[i];
    for (std::size_t k : pieces_of_param_[i])
      pieces_[k].copy_(source.share(name, owned_[k].param_offset, owned_[k].length, params[i].sizes()));
  }
}

void ZeroPartition::scatter_state(OptimizerKind kind, const Fetch& fetch) {
  at::NoGradGuard no_grad;
  optimizer_->state().clear();
  for (std::size_t i = 0; i < reducer_.parameters().size(); ++i) scatter_one(kind, i, fetch);
}

void ZeroPartition::scatter_one(OptimizerKind kind, std::size_t i, const Fetch& fetch) {
  const at::Tensor& param = reducer_.parameters()[i];
  const std::string prefix = fmt::format("optimizer/{}/", reducer_.names()[i]);
  const auto names = state_fields(kind);
  std::vector<at::Tensor> arrays;
  for (const std::string& field : names) {
    auto array = fetch(prefix + field);
    if (array && array->sizes() != param.sizes())
      throw UsageError(fmt::format("checkpoint: '{}{}' has shape [{}] but the model has [{}]", prefix, field,
                                   fmt::join(array->sizes(), ", "), fmt::join(param.sizes(), ", ")));
    if (!array) {
      if (!arrays.empty()) throw UsageError(fmt::format("checkpoint: '{}{}' is missing", prefix, field));
      return;  // no step taken yet for this parameter
    }
    // In the parameter's layout and on its device, so that a piece is a range of its memory order.
    at::Tensor laid = at::empty_like(param, at::MemoryFormat::Preserve).copy_(*array);
    arrays.push_back(laid.as_strided({param.numel()}, {1}, 0));
  }
  std::int64_t step = 1;
  if (has_step_count(kind)) {
    auto count = fetch(prefix + "step");
    if (!count) throw UsageError(fmt::format("checkpoint: '{}step' is missing", prefix));
    step = count->item<std::int64_t>();
  }
  std::vector<std::vector<at::Tensor>> fields(names.size());
  for (std::size_t f = 0; f < names.size(); ++f)
    for (std::size_t k : pieces_of_param_[i])
      fields[f].push_back(arrays[f].narrow(0, owned_[k].param_offset, owned_[k].length).clone());
  restore_pieces(kind, i, step, fields);
}

}  // namespace mnddp
