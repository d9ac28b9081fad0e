// ZeRO's step around an ordinary optimizer: pieces as flat views of the parameters, their gradients
// bound after each finalize(), collective checks over them, and the all-gather of the parameters.
#include "mnddp/zero/zero_partition.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <unordered_map>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"
#include "mnddp/optim/finite_check.hpp"
#include "mnddp/optim/lamb.hpp"
#include "mnddp/optim/lars.hpp"

namespace mnddp {
namespace {

ShardLayout layout_of(const Reducer& reducer, int world) {
  std::vector<std::int64_t> numel;
  for (const auto& p : reducer.parameters()) numel.push_back(p.numel());
  return ShardLayout(reducer.bucket_members(), numel, world);
}

// The trust ratio's norms under ZeRO: each piece's squares are added into its parameter's slot, one
// all-reduce adds every rank's, and each piece gets its whole parameter's norm.
class WholeParameterNorms final : public TensorNorms {
 public:
  WholeParameterNorms(std::unordered_map<const void*, std::int64_t> param_of, std::int64_t params,
                      at::TensorOptions options, Communicator& comm)
      : param_of_(std::move(param_of)), params_(params), options_(options), comm_(comm) {}

  at::Tensor norms(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& tensors) override {
    at::Tensor squares = at::zeros({params_}, options_);
    at::Tensor index;
    if (!tensors.empty()) {
      std::vector<std::int64_t> slots;
      for (const auto& p : params) slots.push_back(param_of_.at(p.unsafeGetTensorImpl()));
      index = at::tensor(slots, at::kLong).to(options_.device());
      // A float64 or bf16 parameter's norm joins the float32 sums in their type.
      squares.index_add_(0, index, own_norms(tensors).to(squares.scalar_type()).square());
    }
    const CollectiveLabel label("ZeRO trust-ratio norms");
    allreduce(comm_, squares, ReduceOp::Sum);
    if (tensors.empty()) return at::empty({0}, options_);
    return squares.index_select(0, index).sqrt();
  }

 private:
  std::unordered_map<const void*, std::int64_t> param_of_;
  std::int64_t params_;
  at::TensorOptions options_;
  Communicator& comm_;
};

}  // namespace

ZeroPartition::ZeroPartition(int stage, Reducer& reducer, Communicator& comm)
    : stage_(stage), reducer_(reducer), comm_(comm), layout_(layout_of(reducer, comm.size())) {
  if (stage < 1 || stage > 2) throw std::invalid_argument("ZeroPartition: the stage must be 1 or 2");
  if (stage == 2 && reducer.shards() == nullptr)
    throw std::invalid_argument("ZeroPartition: ZeRO-2 needs a reducer with shard_gradients");
  const auto& params = reducer_.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!params[i].is_non_overlapping_and_dense())
      throw UsageError(fmt::format("--zero: parameter '{}' is not dense in memory; ZeRO needs dense parameters",
                                   reducer_.names()[i]));
  owned_ = layout_.pieces(comm.rank());
  pieces_of_param_.resize(params.size());
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < owned_.size(); ++k) {
    pieces_.push_back(flat_view(owned_[k].param).narrow(0, owned_[k].param_offset, owned_[k].length));
    pieces_of_param_[owned_[k].param].push_back(k);
  }
}

at::Tensor ZeroPartition::flat_view(std::size_t param) const {
  const at::Tensor& p = reducer_.parameters()[param];
  return p.detach().as_strided({p.numel()}, {1}, p.storage_offset());
}

ParameterGroups ZeroPartition::parameter_groups(bool no_decay_norm_bias) const {
  ParameterGroups groups;
  // A rank may own no piece of a group (or none at all): it still joins the group's collectives.
  groups.keep_empty = true;
  groups.split = no_decay_norm_bias;
  for (std::size_t k = 0; k < owned_.size(); ++k) {
    const std::size_t i = owned_[k].param;
    const std::string name = fmt::format("{}[{}:{}]", reducer_.names()[i], owned_[k].param_offset,
                                         owned_[k].param_offset + owned_[k].length);
    if (no_decay_norm_bias && excluded_from_decay(reducer_.parameters()[i])) {
      groups.no_decay_names.push_back(name);
      groups.no_decay.push_back(pieces_[k]);
    } else {
      groups.decay_names.push_back(name);
      groups.decay.push_back(pieces_[k]);
    }
  }
  return groups;
}

void ZeroPartition::attach(torch::optim::Optimizer& optimizer) {
  optimizer_ = &optimizer;
  auto* adaptive = dynamic_cast<UsesTensorNorms*>(&optimizer);
  if (adaptive == nullptr) return;
  std::unordered_map<const void*, std::int64_t> param_of;
  for (std::size_t k = 0; k < owned_.size(); ++k)
    param_of[pieces_[k].unsafeGetTensorImpl()] = static_cast<std::int64_t>(owned_[k].param);
  const at::Tensor& first = reducer_.parameters().front();
  adaptive->set_tensor_norms(std::make_shared<WholeParameterNorms>(
      std::move(param_of), static_cast<std::int64_t>(reducer_.parameters().size()),
      at::TensorOptions().dtype(at::kFloat).device(first.device()), comm_));
}

const std::vector<at::Tensor>& ZeroPartition::bind_gradients() {
  const auto& params = reducer_.parameters();
  for (std::size_t k = 0; k < owned_.size(); ++k) {
    const ShardPiece& piece = owned_[k];
    at::Tensor& grad = pieces_[k].mutable_grad();
    if (reducer_.unused_everywhere(piece.param)) {
      grad = at::Tensor();
    } else if (stage_ >= 2) {
      grad = reducer_.shards()->gradient(piece.bucket).narrow(0, piece.chunk_offset, piece.length);
    } else {
      const at::Tensor& param = params[piece.param];
      at::Tensor full = param.grad();
      if (!full.defined()) {
        grad = at::Tensor();
        continue;
      }
      // The piece's range is in the parameter's memory order, so the gradient must be laid out alike.
      if (full.strides() != param.strides() || !full.is_non_overlapping_and_dense()) {
        full = at::empty_like(param, at::MemoryFormat::Preserve).copy_(full);
        params[piece.param].mutable_grad() = full;
      }
      grad = full.as_strided({piece.length}, {1}, full.storage_offset() + piece.param_offset);
    }
  }
  return pieces_;
}

void ZeroPartition::release_gradients() {
  for (auto& piece : pieces_) piece.mutable_grad() = at::Tensor();
}

bool ZeroPartition::gradients_finite() {
  std::vector<at::Tensor> grads;
  for (const auto& piece : pieces_) grads.push_back(piece.grad());
  const at::Tensor& first = reducer_.parameters().front();
  at::Tensor finite =
      at::full({1}, all_finite(grads) ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(first.device()));
  const CollectiveLabel label("ZeRO finite-gradient vote");
  allreduce(comm_, finite, ReduceOp::Min);
  return finite.item<int>() == 1;
}

at::Tensor ZeroPartition::nonfinite_flag() {
  std::vector<at::Tensor> grads;
  for (const auto& piece : pieces_) grads.push_back(piece.grad());
  const at::Tensor& first = reducer_.parameters().front();
  at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(first.device()));
  find_nonfinite(grads, found);
  const CollectiveLabel label("ZeRO finite-gradient vote");
  allreduce(comm_, found, ReduceOp::Max);
  return found;
}

void ZeroPartition::clip_grad_norm(double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& piece : pieces_)
    if (piece.grad().defined()) grads.push_back(piece.grad());
  const at::Tensor& first = reducer_.parameters().front();
  at::Tensor squares = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(first.device()));
  if (!grads.empty()) squares += own_norms(grads).square().sum();
  const CollectiveLabel label("ZeRO gradient norm");
  allreduce(comm_, squares, ReduceOp::Sum);
  const at::Tensor total = squares.sqrt();
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6), never up.
  const at::Tensor coefficient = at::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  if (!grads.empty()) at::_foreach_mul_(grads, coefficient);
}

at::Tensor ZeroPartition::bucket_buffer(std::size_t bucket) {
  const at::Tensor& param = reducer_.parameters()[reducer_.bucket_members()[bucket].front()];
  const std::int64_t needed = layout_.padded(bucket);
  for (auto& buffer : buffers_) {
    if (buffer.scalar_type() != param.scalar_type()) continue;
    if (buffer.numel() < needed) buffer = at::empty({needed}, buffer.options());
    return buffer.narrow(0, 0, needed);
  }
  buffers_.push_back(at::empty({needed}, param.options()));
  return buffers_.back();
}

void ZeroPartition::all_gather_parameters() {
  at::NoGradGuard no_grad;
  const int rank = comm_.rank();
  for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
    at::Tensor buffer = bucket_buffer(b);
    at::Tensor mine = buffer.narrow(0, layout_.chunk(b) * rank, layout_.chunk(b));
    for (std::size_t k = 0; k < owned_.size(); ++k)
      if (owned_[k].bucket == b) mine.narrow(0, owned_[k].chunk_offset, owned_[k].length).copy_(pieces_[k]);
    {
      const CollectiveLabel label(fmt::format("ZeRO parameter all-gather, bucket {}", b));
      allgather_in_place(comm_, buffer);
    }
    for (std::size_t i : reducer_.bucket_members()[b])
      flat_view(i).copy_(buffer.narrow(0, layout_.offset_in_bucket(i), reducer_.parameters()[i].numel()));
  }
}

namespace {

std::int64_t fields_of(OptimizerKind kind, double momentum) {
  switch (kind) {
    case OptimizerKind::AdamW:
    case OptimizerKind::Lamb:
      return 2;
    case OptimizerKind::Lars:
      return 1;
    case OptimizerKind::Sgd:
      return momentum > 0.0 ? 1 : 0;
  }
  return 0;
}

}  // namespace

std::int64_t ZeroPartition::state_elements(OptimizerKind kind, double momentum) const {
  return fields_of(kind, momentum) * layout_.owned_elements(comm_.rank());
}

std::int64_t ZeroPartition::state_elements_unsharded(OptimizerKind kind, double momentum) const {
  std::int64_t total = 0;
  for (const auto& p : reducer_.parameters()) total += p.numel();
  return fields_of(kind, momentum) * total;
}

}  // namespace mnddp
