// Distributed sampling: which global sample indices each rank reads in each epoch.
// Mode `sample`: one epoch-seeded global permutation cut into disjoint per-rank slices. Mode `shard`:
// whole files dealt to ranks (locality at scale) with an in-rank shuffle buffer. Both give every
// rank the same number of steps (uneven step counts hang DDP) and can resume mid-epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"

namespace mnddp {

struct SamplerOptions {
  std::int64_t num_samples = 0;  // shard mode: 0 means the sum of shard_sizes
  int world_size = 1;
  int rank = 0;
  std::int64_t batch_size = 1;  // per rank
  std::uint64_t seed = 0;
  bool shuffle = true;
  // true: drop the tail that does not fill a whole global batch (each epoch a different tail).
  //       Shard mode: every rank stops after the least-loaded rank's last full batch.
  // false: pad the last global batch by wrapping around to the start of the permutation, so a
  //        few samples are seen twice in that epoch. Shard mode: each rank wraps around its own
  //        order up to the most-loaded rank's batch count.
  bool drop_last = true;
  // Micro-batches per optimizer step (--grad-accum-steps): with drop_last false the epoch is padded
  // to whole steps, so its step count depends on the global batch of a step only, not on how it is
  // split into ranks, batches and accumulation (a resume on another world size keeps it).
  std::int64_t micro_batches_per_step = 1;
  PartitionMode mode = PartitionMode::Sample;
  // Shard mode: samples per shard in ShardIndex order; shard s holds the global indices
  // [sum of sizes before s, + shard_sizes[s]).
  std::vector<std::int64_t> shard_sizes;
  // Shard mode: samples held by the in-rank shuffle buffer (<= 1: each shard read in file order).
  std::int64_t shuffle_buffer = 4096;
  // Shard mode, > 0: instead of the streaming buffer, each rank shuffles the samples of every run of
  // this many consecutive shards of its own fully, one run after another, so each shard's samples
  // stay inside one window (--shuffle-unit chunk, whose "shards" are HDF5 chunks).
  std::int64_t window_shards = 0;
};

// Where training stands inside an epoch, in batches of SamplerOptions::batch_size on this rank.
struct SamplerPosition {
  std::int64_t epoch = 0;
  std::int64_t batches_consumed = 0;
};

class DistributedSampler {
 public:
  // Throws UsageError when the data cannot give every rank at least one full batch
  // ("batch larger than the data", "more ranks than samples", "fewer shards than ranks").
  explicit DistributedSampler(const SamplerOptions& options);

  const SamplerOptions& options() const { return options_; }
  // The same in every epoch and on every rank, in both modes.
  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::int64_t samples_per_rank() const { return batches_per_epoch_ * options_.batch_size; }
  // This rank's indices for `epoch`, in batch order: batch b is [b*B, (b+1)*B).
  std::vector<std::int64_t> epoch_indices(std::int64_t epoch) const;
  // What is left of `epoch` after `batches_consumed` batches: exactly the tail of epoch_indices,
  // so a run restored from a checkpoint continues the same order. Throws UsageError when the
  // position lies outside the epoch (the checkpoint was made with other data or batch size).
  std::vector<std::int64_t> epoch_indices_from(std::int64_t epoch, std::int64_t batches_consumed) const;
  std::vector<std::int64_t> epoch_indices_from(const SamplerPosition& position) const {
    return epoch_indices_from(position.epoch, position.batches_consumed);
  }
  // Sample mode: the epoch's global order, before slicing (the same on every rank).
  std::vector<std::int64_t> global_order(std::int64_t epoch) const;
  // Shard mode: the shard numbers each rank reads in `epoch` ([rank][k], in reading order); the
  // same on every rank. Sample mode: empty.
  std::vector<std::vector<std::size_t>> shard_assignment(std::int64_t epoch) const;
  // A hash of everything that determines the world's order (mode, sizes, world size, batch, seed,
  // flags; not the rank), for a checkpoint to verify that a resumed run continues the same sequence.
  std::uint64_t fingerprint() const;

 private:
  std::vector<std::int64_t> shard_mode_indices(std::int64_t epoch) const;
  // drop_last false: enough batches of `batch` for `samples`, rounded up to whole steps.
  std::int64_t padded_batches(std::int64_t samples, std::int64_t batch) const;

  SamplerOptions options_;
  std::int64_t batches_per_epoch_ = 0;
  std::vector<std::int64_t> shard_first_;  // shard mode: global index of each shard's first sample
};

// Evaluation split: rank r gets [r*N/W, (r+1)*N/W). Sizes differ by at most one; nothing is padded
// or duplicated, so summed counts are exact.
std::vector<std::int64_t> eval_indices(std::int64_t num_samples, int world_size, int rank);

}  // namespace mnddp
