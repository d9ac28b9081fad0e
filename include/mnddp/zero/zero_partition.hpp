// ZeRO-1 and ZeRO-2's side of the optimizer step (--zero 1|2): each rank's optimizer holds and
// updates only this rank's pieces of the parameters (shard_layout.hpp), so its state is 1/N of the
// whole; after the step every rank's updated pieces are all-gathered and the replicas are identical
// again. The optimizer itself is the ordinary one (make_optimizer over pieces()); this class binds
// the pieces' gradients, makes the whole-model checks collective (finite, norm) and gathers.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/ddp/reducer.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/zero/shard_layout.hpp"

namespace mnddp {

class ZeroPartition final : public ShardedOptimizerState {
 public:
  // `reducer`: the DDP reducer whose buckets define the chunks (with shard_gradients for stage 2);
  // `comm`: its gradient communicator, which carries the all-gathers and norms.
  ZeroPartition(int stage, Reducer& reducer, Communicator& comm);

  int stage() const { return stage_; }
  const ShardLayout& layout() const { return layout_; }

  // The optimizer's param groups over this rank's pieces: a piece joins its parameter's group (by
  // --no-decay-norm-bias, decided on the whole parameter). Flat views into the parameters.
  ParameterGroups parameter_groups(bool no_decay_norm_bias) const;
  // Uses `optimizer` (made over parameter_groups()); LARS and LAMB get whole-parameter norms.
  void attach(torch::optim::Optimizer& optimizer);

  // After the reducer's finalize(): points each piece's gradient at this rank's share of the averaged
  // gradients (none where the parameter has none) and returns the pieces.
  const std::vector<at::Tensor>& bind_gradients();
  // Drops the pieces' gradients after the step: at stage 1 they are views of the parameters' whole
  // gradients, whose memory would otherwise live on beside the next backward's.
  void release_gradients();
  // Collective: whether the gradients of every rank's pieces are finite.
  bool gradients_finite();
  // Collective: the same verdict left on the device, one float that is 1 where some rank's piece
  // holds NaN/Inf (the all-reduce ordered on the GPU; no host wait).
  at::Tensor nonfinite_flag();
  // Collective: torch's clip_grad_norm_ over the whole model (the norm adds every rank's pieces).
  void clip_grad_norm(double max_norm);
  // Collective: every rank's updated pieces to every rank, into the parameters.
  void all_gather_parameters();

  // Optimizer-state values (elements) this rank holds for `kind`, and the whole model's at --zero 0.
  std::int64_t state_elements(OptimizerKind kind, double momentum) const;
  std::int64_t state_elements_unsharded(OptimizerKind kind, double momentum) const;

  // Checkpoints (ShardedOptimizerState). Of a dense parameter each rank gives its piece as a share
  // of the array (a rank without a piece gives an empty one); of any other (channels-last: a piece
  // is no range of its C order) the ranks' pieces are all-gathered into whole arrays, as are the
  // step counts. Restoring, each rank reads only its pieces of the arrays of dense parameters.
  ForCheckpoint for_checkpoint(OptimizerKind kind) override;
  void restore(OptimizerKind kind, const Source& source) override;
  std::vector<std::string> parameters_read_in_pieces() const override;
  void read_parameter_pieces(const Source& source) override;
  void gather_parameters() override { all_gather_parameters(); }
  // Every parameter's state as whole arrays (collective): all-gathered one bucket at a time.
  std::vector<std::pair<std::string, at::Tensor>> gather_state(OptimizerKind kind);

  // Whole arrays from `fetch` (collective), each rank keeping its pieces.
  using Fetch = std::function<std::optional<at::Tensor>(const std::string&)>;
  void scatter_state(OptimizerKind kind, const Fetch& fetch);

 private:
  // A parameter's elements in memory order (a bucket slot's order), as a flat view.
  at::Tensor flat_view(std::size_t param) const;
  // A reusable buffer of bucket `bucket`'s padded size, in its parameters' dtype.
  at::Tensor bucket_buffer(std::size_t bucket);
  // Collective: every parameter's step count (0: no state yet), the most of any rank's pieces.
  std::vector<std::int64_t> agreed_steps(OptimizerKind kind);
  // Collective: the whole arrays of the parameters `wanted` says yes to (all-gathered by bucket).
  std::vector<std::pair<std::string, at::Tensor>> gather_state_of(OptimizerKind kind, const std::vector<bool>& wanted,
                                                                  const std::vector<std::int64_t>& steps);
  // The state of piece `k` (nullptr before its first step).
  torch::optim::OptimizerParamState* state_of_piece(std::size_t k);
  // Puts one parameter's state back into its pieces: `fields[f]` holds the field's values of the
  // pieces of parameter `param`, piece by piece (pieces_of_param_ order).
  void restore_pieces(OptimizerKind kind, std::size_t param, std::int64_t step,
                      const std::vector<std::vector<at::Tensor>>& fields);
  // One parameter's state from whole arrays (collective).
  void scatter_one(OptimizerKind kind, std::size_t param, const Fetch& fetch);

  int stage_;
  Reducer& reducer_;
  Communicator& comm_;
  ShardLayout layout_;
  std::vector<ShardPiece> owned_;
  std::vector<at::Tensor> pieces_;  // owned_[i]'s view of its parameter
  std::vector<std::vector<std::size_t>> pieces_of_param_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::vector<at::Tensor> buffers_;  // bucket_buffer()'s, one per dtype
};

}  // namespace mnddp
