// Distributed sampling: which global sample indices each rank reads in each epoch.
// Training: one epoch-seeded global permutation, cut into disjoint equal per-rank slices, so every
// rank runs the same number of steps (uneven step counts hang DDP). Evaluation: a contiguous split
// that counts every sample exactly once.
#pragma once

#include <cstdint>
#include <vector>

namespace mnddp {

struct SamplerOptions {
  std::int64_t num_samples = 0;
  int world_size = 1;
  int rank = 0;
  std::int64_t batch_size = 1;  // per rank
  std::uint64_t seed = 0;
  bool shuffle = true;
  // true: drop the tail that does not fill a whole global batch (each epoch a different tail).
  // false: pad the last global batch by wrapping around to the start of the permutation, so a
  //        few samples are seen twice in that epoch.
  bool drop_last = true;
};

class DistributedSampler {
 public:
  // Throws UsageError when the data cannot give every rank at least one full batch
  // ("batch larger than the data", "more ranks than samples").
  explicit DistributedSampler(const SamplerOptions& options);

  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::int64_t samples_per_rank() const { return batches_per_epoch_ * options_.batch_size; }
  // This rank's indices for `epoch`, in batch order: batch b is [b*B, (b+1)*B).
  std::vector<std::int64_t> epoch_indices(std::int64_t epoch) const;
  // The epoch's global order, before slicing (the same on every rank).
  std::vector<std::int64_t> global_order(std::int64_t epoch) const;

 private:
  SamplerOptions options_;
  std::int64_t batches_per_epoch_ = 0;
};

// Evaluation split: rank r gets [r*N/W, (r+1)*N/W). Sizes differ by at most one; nothing is padded
// or duplicated, so summed counts are exact.
std::vector<std::int64_t> eval_indices(std::int64_t num_samples, int world_size, int rank);

}  // namespace mnddp
