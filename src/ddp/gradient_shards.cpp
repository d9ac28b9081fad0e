// ZeRO-2's bucket pool and kept gradient chunks.
#include "mnddp/ddp/gradient_shards.hpp"

#include <ATen/ATen.h>

namespace mnddp {

GradientShards::GradientShards(ShardLayout layout, int rank, std::vector<at::TensorOptions> wire,
                               std::vector<at::TensorOptions> kept)
    : layout_(std::move(layout)), rank_(rank), wire_(std::move(wire)) {
  for (std::size_t b = 0; b < layout_.bucket_count(); ++b) kept_.push_back(at::zeros({layout_.chunk(b)}, kept[b]));
}

namespace {

// The smallest pooled buffer that fits (buckets are mostly the same size: the cap).
template <typename Pool>
auto best_fit(Pool& pool, std::int64_t needed, const at::TensorOptions& options) {
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it)
    if (it->scalar_type() == options.dtype().toScalarType() && it->device() == options.device() &&
        it->numel() >= needed && (best == pool.end() || it->numel() < best->numel()))
      best = it;
  return best;
}

}  // namespace

bool GradientShards::has_free(std::size_t bucket) const {
  return best_fit(pool_, layout_.padded(bucket), wire_[bucket]) != pool_.end();
}

at::Tensor GradientShards::acquire(std::size_t bucket) {
  const std::int64_t needed = layout_.padded(bucket);
  auto best = best_fit(pool_, needed, wire_[bucket]);
  const at::TensorOptions& options = wire_[bucket];
  at::Tensor storage;
  if (best != pool_.end()) {
    storage = std::move(*best);
    pool_.erase(best);
  } else {
    storage = at::empty({needed}, options);
    buffer_bytes_ += static_cast<std::int64_t>(storage.nbytes());
  }
  const std::int64_t used = layout_.bucket_elements(bucket);
  storage.narrow(0, used, needed - used).zero_();  // padding: reduced with everyone's zeros
  return storage;
}

void GradientShards::keep_chunk_and_release(std::size_t bucket, const at::Tensor& flat, at::Tensor storage) {
  const std::int64_t chunk = layout_.chunk(bucket);
  kept_[bucket].copy_(flat.narrow(0, chunk * rank_, chunk));
  pool_.push_back(std::move(storage));
}

std::int64_t GradientShards::kept_bytes() const {
  std::int64_t total = 0;
  for (const auto& chunk : kept_) total += static_cast<std::int64_t>(chunk.nbytes());
  return total;
}

}  // namespace mnddp
