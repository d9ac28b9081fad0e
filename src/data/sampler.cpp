// DistributedSampler: the epoch-seeded global permutation cut into per-rank slices of each global
// batch (mode sample), whole shards dealt to ranks with a bounded shuffle buffer (mode shard),
// mid-epoch positions, and the contiguous evaluation split.
#include "mnddp/data/sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <span>
#include <utility>

#include "mnddp/error.hpp"
#include "portable_random.hpp"

namespace mnddp {
namespace {

// Generator streams of shard mode, apart from sample mode's (seed, epoch) permutation so that the
// two modes never share random draws by accident.
constexpr std::uint64_t kShardDealStream = 0x5348415244ull;      // "SHARD"
constexpr std::uint64_t kShuffleBufferStream = 0x4255464645ull;  // "BUFFE"

// Fisher-Yates with our own bounded draw: identical on every rank, compiler and standard library.
template <typename T>
void portable_shuffle(std::span<T> items, std::mt19937_64& rng) {
  for (std::size_t i = items.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(detail::bounded_random(rng, i));
    std::swap(items[i - 1], items[j]);
  }
}

// Greedy balancing (largest shard first onto the least-loaded rank, ties to the lower rank) of an
// epoch-seeded permutation of the shards. The permutation only decides between shards of equal
// size, so each rank's load is the same in every epoch; which files it reads changes.
std::vector<std::vector<std::size_t>> deal_shards(const SamplerOptions& o, std::int64_t epoch) {
  const std::vector<std::int64_t>& sizes = o.shard_sizes;
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (o.shuffle) {
    std::mt19937_64 rng(
        detail::mix_seed(detail::mix_seed(o.seed, kShardDealStream), static_cast<std::uint64_t>(epoch)));
    portable_shuffle(std::span(order), rng);
  }
  std::vector<std::size_t> position(order.size());
  for (std::size_t p = 0; p < order.size(); ++p) position[order[p]] = p;

  std::vector<std::size_t> by_size = order;
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::int64_t> load(static_cast<std::size_t>(o.world_size), 0);
  std::vector<std::vector<std::size_t>> assigned(load.size());
  for (const std::size_t shard : by_size) {
    const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    assigned[lightest].push_back(shard);
    load[lightest] += sizes[shard];
  }
  // Each rank reads its files in permutation order, so the file cut short by the common batch
  // count differs between epochs.
  for (auto& shards : assigned)
    std::sort(shards.begin(), shards.end(), [&](std::size_t a, std::size_t b) { return position[a] < position[b]; });
  return assigned;
}

std::int64_t shard_load(const SamplerOptions& o, const std::vector<std::size_t>& shards) {
  std::int64_t total = 0;
  for (const std::size_t s : shards) total += o.shard_sizes[s];
  return total;
}

void validate_shard_mode(SamplerOptions& o) {
  if (o.shard_sizes.empty()) throw Error("DistributedSampler: shard mode needs the shard sizes (internal error)");
  std::int64_t total = 0;
  for (const auto size : o.shard_sizes) {
    if (size < 1) throw Error(fmt::format("DistributedSampler: shard of {} samples (internal error)", size));
    total += size;
  }
  if (o.num_samples == 0) o.num_samples = total;
  if (o.num_samples != total)
    throw Error(
        fmt::format("DistributedSampler: {} samples but the shards hold {} (internal error)", o.num_samples, total));
  const auto shards = static_cast<std::int64_t>(o.shard_sizes.size());
  if (shards < o.world_size)
    throw UsageError(
        fmt::format("--partition shard: {} data file{} for {} ranks, but every rank needs at least one whole file (use "
                    "--partition sample, or split the data with 'mnddp-data reshard --shards N' for N >= {})",
                    shards, shards == 1 ? "" : "s", o.world_size, o.world_size));
}

}  // namespace

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  auto& o = options_;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw Error(fmt::format("DistributedSampler: rank {} is not in a world of {} ranks", o.rank, o.world_size));
  if (o.batch_size < 1) throw UsageError(fmt::format("--batch-size must be at least 1, got {}", o.batch_size));
  if (o.micro_batches_per_step < 1)
    throw UsageError(fmt::format("--grad-accum-steps must be at least 1, got {}", o.micro_batches_per_step));

  if (o.mode == PartitionMode::Shard) {
    validate_shard_mode(o);
    std::int64_t first = 0;
    for (const auto size : o.shard_sizes) {
      shard_first_.push_back(first);
      first += size;
    }
    // Loads are epoch-independent (see deal_shards), so epoch 0 decides the step count for all.
    std::int64_t lightest = o.num_samples;
    std::int64_t heaviest = 0;
    for (const auto& shards : deal_shards(o, 0)) {
      lightest = std::min(lightest, shard_load(o, shards));
      heaviest = std::max(heaviest, shard_load(o, shards));
    }
    if (o.drop_last && lightest < o.batch_size)
      throw UsageError(fmt::format(
          "--partition shard: the least-loaded of {} ranks gets {} samples from its files, less than one batch of "
          "--batch-size {} (use --partition sample, a smaller --batch-size, or more balanced files from "
          "'mnddp-data reshard')",
          o.world_size, lightest, o.batch_size));
    batches_per_epoch_ = o.drop_last ? lightest / o.batch_size : padded_batches(heaviest, o.batch_size);
    return;
  }

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
  batches_per_epoch_ = o.drop_last ? o.num_samples / global_batch : padded_batches(o.num_samples, global_batch);
}

std::int64_t DistributedSampler::padded_batches(std::int64_t samples, std::int64_t batch) const {
  const std::int64_t step = batch * options_.micro_batches_per_step;
  return (samples + step - 1) / step * options_.micro_batches_per_step;
}

std::vector<std::int64_t> DistributedSampler::global_order(std::int64_t epoch) const {
  if (options_.mode == PartitionMode::Shard) return {};
  std::vector<std::int64_t> order(static_cast<std::size_t>(options_.num_samples));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!options_.shuffle) return order;
  std::mt19937_64 rng(detail::mix_seed(options_.seed, static_cast<std::uint64_t>(epoch)));
  portable_shuffle(std::span(order), rng);
  return order;
}

std::vector<std::vector<std::size_t>> DistributedSampler::shard_assignment(std::int64_t epoch) const {
  if (options_.mode != PartitionMode::Shard) return {};
  return deal_shards(options_, epoch);
}

std::vector<std::int64_t> DistributedSampler::shard_mode_indices(std::int64_t epoch) const {
  const auto& o = options_;
  const auto shards = deal_shards(o, epoch)[static_cast<std::size_t>(o.rank)];
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(shard_load(o, shards)));
  const bool buffered = o.shuffle && o.shuffle_buffer > 1;
  std::mt19937_64 rng(detail::mix_seed(
      detail::mix_seed(detail::mix_seed(o.seed, kShuffleBufferStream), static_cast<std::uint64_t>(epoch)),
      static_cast<std::uint64_t>(o.rank)));
  if (o.window_shards > 0) {
    // Windows of shards, each shuffled whole: a shard's samples never leave its window.
    const auto per_window = static_cast<std::size_t>(o.window_shards);
    for (std::size_t first = 0; first < shards.size(); first += per_window) {
      const std::size_t begin = order.size();
      for (std::size_t k = first; k < std::min(shards.size(), first + per_window); ++k)
        for (std::int64_t i = 0; i < o.shard_sizes[shards[k]]; ++i) order.push_back(shard_first_[shards[k]] + i);
      if (o.shuffle) portable_shuffle(std::span<std::int64_t>(order).subspan(begin), rng);
    }
  } else {
    // A streaming shuffle buffer, as a reader of large files would run it: samples enter in file
    // order, and each one entering evicts a uniformly chosen one. Reads stay within a window of
    // shuffle_buffer samples of each file.
    std::vector<std::int64_t> buffer;
    if (buffered) buffer.reserve(static_cast<std::size_t>(o.shuffle_buffer));
    for (const std::size_t shard : shards) {
      const std::int64_t first = shard_first_[shard];
      for (std::int64_t i = first; i < first + o.shard_sizes[shard]; ++i) {
        if (!buffered) {
          order.push_back(i);
        } else if (static_cast<std::int64_t>(buffer.size()) < o.shuffle_buffer) {
          buffer.push_back(i);
        } else {
          auto& slot = buffer[static_cast<std::size_t>(detail::bounded_random(rng, buffer.size()))];
          order.push_back(slot);
          slot = i;
        }
      }
    }
    portable_shuffle(std::span(buffer), rng);
    order.insert(order.end(), buffer.begin(), buffer.end());
  }

  // Equal step counts: cut to the common batch count (drop_last) or wrap around this rank's own
  // order up to it (padding).
  const auto wanted = static_cast<std::size_t>(samples_per_rank());
  if (order.size() >= wanted) {
    order.resize(wanted);
  } else {
    const std::size_t have = order.size();
    for (std::size_t k = have; k < wanted; ++k) order.push_back(order[k % have]);
  }
  return order;
}

std::vector<std::int64_t> DistributedSampler::epoch_indices(std::int64_t epoch) const {
  if (options_.mode == PartitionMode::Shard) return shard_mode_indices(epoch);
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

std::vector<std::int64_t> DistributedSampler::epoch_indices_from(std::int64_t epoch,
                                                                 std::int64_t batches_consumed) const {
  if (epoch < 0 || batches_consumed < 0 || batches_consumed > batches_per_epoch_)
    throw UsageError(fmt::format(
        "resume position epoch {} batch {} is outside an epoch of {} batches (was the checkpoint made with other "
        "data, --batch-size or ranks?)",
        epoch, batches_consumed, batches_per_epoch_));
  std::vector<std::int64_t> indices = epoch_indices(epoch);
  indices.erase(indices.begin(), indices.begin() + batches_consumed * options_.batch_size);
  return indices;
}

std::uint64_t DistributedSampler::fingerprint() const {
  const auto& o = options_;
  std::uint64_t hash = detail::splitmix64(0x6d6e646470ull);  // "mnddp"
  const auto add = [&hash](std::uint64_t value) { hash = detail::splitmix64(hash ^ detail::splitmix64(value)); };
  add(static_cast<std::uint64_t>(o.mode));
  add(static_cast<std::uint64_t>(o.num_samples));
  add(static_cast<std::uint64_t>(o.world_size));
  add(static_cast<std::uint64_t>(o.batch_size));
  add(o.seed);
  add(o.shuffle ? 1 : 0);
  add(o.drop_last ? 1 : 0);
  if (!o.drop_last) add(static_cast<std::uint64_t>(o.micro_batches_per_step));
  if (o.mode == PartitionMode::Shard) {
    add(static_cast<std::uint64_t>(o.shuffle_buffer));
    add(static_cast<std::uint64_t>(o.window_shards));
    for (const auto size : o.shard_sizes) add(static_cast<std::uint64_t>(size));
  }
  return hash;
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
