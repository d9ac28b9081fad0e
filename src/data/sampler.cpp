// DistributedSampler: an epoch-seeded global permutation cut into per-rank slices of each global
// batch, and the contiguous evaluation split.
#include "mnddp/data/sampler.hpp"

#include <fmt/format.h>

#include <numeric>
#include <random>
#include <utility>

#include "mnddp/error.hpp"
#include "portable_random.hpp"

namespace mnddp {

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  const auto& o = options_;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw Error(fmt::format("DistributedSampler: rank {} is not in a world of {} ranks", o.rank, o.world_size));
  if (o.batch_size < 1) throw UsageError(fmt::format("--batch-size must be at least 1, got {}", o.batch_size));
  if (o.num_samples < 1) throw UsageError("the training data has no samples");
  if (o.world_size > o.num_samples)
    throw UsageError(fmt::format("{} ranks but only {} training samples: use at most {} ranks", o.world_size,
                                 o.num_samples, o.num_samples));
  const std::int64_t global_batch = static_cast<std::int64_t>(o.world_size) * o.batch_size;
  if (o.drop_last && global_batch > o.num_samples)
    throw UsageError(
        fmt::format("--batch-size {} x {} ranks = {} samples per step exceeds the {} training samples "
                    "(lower --batch-size, use fewer ranks, or set --drop-last false to pad)",
                    o.batch_size, o.world_size, global_batch, o.num_samples));
  batches_per_epoch_ = o.drop_last ? o.num_samples / global_batch : (o.num_samples + global_batch - 1) / global_batch;
}

std::vector<std::int64_t> DistributedSampler::global_order(std::int64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(options_.num_samples));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!options_.shuffle) return order;
  // Fisher-Yates with our own bounded draw: identical on every rank, compiler and standard library.
  std::mt19937_64 rng(detail::mix_seed(options_.seed, static_cast<std::uint64_t>(epoch)));
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(detail::bounded_random(rng, i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<std::int64_t> DistributedSampler::epoch_indices(std::int64_t epoch) const {
  const std::vector<std::int64_t> order = global_order(epoch);
  const std::int64_t n = options_.num_samples;
  const std::int64_t batch = options_.batch_size;
  const std::int64_t global_batch = static_cast<std::int64_t>(options_.world_size) * batch;
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(samples_per_rank()));
  // Rank r takes the r-th block of B inside every global batch, so N ranks x batch B see exactly
  // the samples that 1 rank x batch N*B would, step by step. Positions past the end wrap around
  // (drop_last=false pads the final global batch from the start of the permutation).
  for (std::int64_t b = 0; b < batches_per_epoch_; ++b) {
    const std::int64_t first = b * global_batch + options_.rank * batch;
    for (std::int64_t k = 0; k < batch; ++k) mine.push_back(order[static_cast<std::size_t>((first + k) % n)]);
  }
  return mine;
}

std::vector<std::int64_t> eval_indices(std::int64_t num_samples, int world_size, int rank) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error(fmt::format("eval_indices: rank {} is not in a world of {} ranks", rank, world_size));
  if (num_samples < 0) throw Error(fmt::format("eval_indices: negative sample count {}", num_samples));
  const std::int64_t begin = rank * num_samples / world_size;
  const std::int64_t end = (rank + 1) * num_samples / world_size;
  std::vector<std::int64_t> mine(static_cast<std::size_t>(end - begin));
  std::iota(mine.begin(), mine.end(), begin);
  return mine;
}

}  // namespace mnddp
