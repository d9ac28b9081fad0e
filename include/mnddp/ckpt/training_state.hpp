// What a checkpoint holds, taken from and put back into live torch objects: parameters, buffers
// and optimizer state by parameter name; the loss scaler; per-rank RNG states; the position in
// training. Writing is collective (every rank calls with the same replicated state); reading is
// done by rank 0 and broadcast, except under --zero 1|2, where each rank reads its own pieces of the
// parameters and optimizer state.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mnddp/amp/loss_scaler.hpp"
#include "mnddp/choices.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/comm/communicator.hpp"

namespace mnddp {

// Where training stands. `global_batches_done` counts this epoch's micro-batches consumed, in units
// of the global batch (world_size x batch_size), so it keeps its meaning on another world size.
struct TrainingPosition {
  std::int64_t step = 0;   // optimizer steps done
  std::int64_t epoch = 0;  // the epoch in progress (or about to start)
  std::int64_t global_batches_done = 0;
  std::int64_t world_size = 1;
  std::int64_t batch_size = 1;  // per rank, when written
  // Micro-batches per optimizer step when written; 0 when the file does not say (written before it
  // was recorded: its stored config has it).
  std::int64_t grad_accum_steps = 1;
  // The log interval in progress, so a resumed run logs the same losses as an uninterrupted one.
  double interval_loss = 0.0;
  std::int64_t interval_steps = 0;
};

// The optimizer state when each rank holds only its share of it (--zero 1|2; zero/zero_partition
// implements it). A checkpoint stores and restores it as the same whole per-parameter arrays, keyed
// "optimizer/<name>/<field>" in the parameter's shape, that --zero 0 stores, so that any world size
// and --zero reads it.
class ShardedOptimizerState {
 public:
  virtual ~ShardedOptimizerState() = default;

  // This rank's share of one array: elements [first, first + values.numel()) in C order (possibly
  // none), written in place by parallel HDF5.
  struct Share {
    std::string path;
    std::vector<std::int64_t> shape;
    std::int64_t first = 0;
    at::Tensor values;  // on the CPU
  };
  // Arrays held whole by every rank, and shares: the same paths in the same order on every rank.
  struct ForCheckpoint {
    std::vector<std::pair<std::string, at::Tensor>> whole;
    std::vector<Share> shares;
  };
  // Collective.
  virtual ForCheckpoint for_checkpoint(OptimizerKind kind) = 0;

  // Where restore() reads from. `whole` fetches a whole array by key (collective: every rank asks
  // for the same keys in the same order); `has` says whether the file has an array (collective too:
  // rank 0 looks, every rank gets its answer); `share` reads
  // elements [first, first + count) of one on this rank alone, and throws if its shape is not `shape`.
  struct Source {
    std::function<std::optional<at::Tensor>(const std::string&)> whole;
    std::function<bool(const std::string&)> has;
    std::function<at::Tensor(const std::string&, std::int64_t, std::int64_t, at::IntArrayRef)> share;
  };
  // Collective.
  virtual void restore(OptimizerKind kind, const Source& source) = 0;

  // The parameters too are read in pieces, each rank its own, and all-gathered: the ones named
  // here (dense ones; the others are read whole). read_parameter_pieces() reads this rank's pieces
  // from `source.share` alone (no collective: the caller agrees on its failure before
  // gather_parameters(), which is collective).
  virtual std::vector<std::string> parameters_read_in_pieces() const = 0;
  virtual void read_parameter_pieces(const Source& source) = 0;
  virtual void gather_parameters() = 0;
};

struct TrainingStateRefs {
  torch::nn::Module& model;
  torch::optim::Optimizer& optimizer;
  OptimizerKind optimizer_kind;
  LossScaler& scaler;
  c10::Device device;
  std::vector<std::int64_t> sample_shape;  // stored so readers can rebuild the model (load_checkpoint.py)
  // --zero 1|2: the optimizer holds this rank's pieces only; its state goes through this.
  ShardedOptimizerState* sharded = nullptr;
};

// A checkpoint's content, copied to host memory at a step boundary: training may go on while it is
// written (--checkpoint-async). The same on every rank except where noted (per-rank arrays are
// gathered already).
struct StateSnapshot {
  struct Array {
    std::string path;   // "model/fc.weight"
    at::Tensor tensor;  // on the CPU, contiguous
  };
  std::vector<Array> arrays;
  // --zero 1|2: this rank's shares of the optimizer-state arrays (ArrayShare), the same paths in the
  // same order on every rank.
  struct Share {
    std::string path;
    std::vector<std::int64_t> shape;
    std::int64_t first = 0;
    at::Tensor values;  // on the CPU, contiguous, possibly empty
  };
  std::vector<Share> shares;
  std::vector<std::pair<std::string, std::string>> attributes;  // config text, versions, position
  std::uint64_t bytes() const;
};

// Collective over `comm` (it gathers the per-rank RNG states and losses): every rank calls it at the
// same step with the same replicated state. `copy`: own every byte (for writing while training goes
// on); otherwise CPU tensors are shared with the live model and the snapshot must be written before
// the next step.
StateSnapshot take_snapshot(Communicator& comm, const TrainingStateRefs& state, const TrainingPosition& position,
                            const std::string& config_ini, bool copy);

// Collective over the writer's communicator; touches no live torch object (any thread may run it).
// (ckpt/snapshot_writer.cpp, like the two below.)
void write_snapshot(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot);
// The node-local level's parts at --zero 1|2 (ckpt/local_files.hpp): everything but the shares, and
// this rank's shares alone, each a one-dimensional array placed by the `shares` attribute
// (ckpt/share_index.hpp). Both carry the snapshot's attributes.
void write_snapshot_base(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot);
void write_snapshot_own_shares(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot);

// What a checkpoint was written with: its position (rank 0 reads the attributes; every rank receives
// them) and its stored config text. Collective; reads no array but the per-rank interval losses.
struct CheckpointOrigin {
  TrainingPosition position;
  std::string config_ini;
};
CheckpointOrigin read_checkpoint_origin(const std::string& path, Communicator& comm);

// Collective: rank 0 reads `path` (checksums verified) and every rank receives the state. Throws
// UsageError naming the checkpoint when it does not fit the model (a missing or misshapen parameter).
TrainingPosition read_training_state(const std::string& path, Communicator& comm, const TrainingStateRefs& state);

}  // namespace mnddp
