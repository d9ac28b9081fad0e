// DecodedChunkCache: decoding a batch's missing chunks on the pool, and least-recently-used eviction.
#include "decoded_chunk_cache.hpp"

#include <algorithm>
#include <cstdint>

namespace mnddp {

bool DecodedChunkCache::decode(std::size_t shard, CompressedChunks& chunks, std::span<const std::int64_t> rows) {
  std::vector<std::size_t> missing;
  std::size_t last = SIZE_MAX;
  ++tick_;
  for (const std::int64_t row : rows) {
    const auto chunk = static_cast<std::size_t>(row / chunks.rows_per_chunk());
    if (chunk == last) continue;
    last = chunk;
    if (!chunks.locate(chunk)) return false;
    const auto found = entries_.find(key(shard, chunk));
    if (found != entries_.end())
      found->second.used = tick_;
    else
      missing.push_back(chunk);
  }
  if (missing.empty()) return true;
  if (!pool_) {
    pool_ = std::make_unique<DecodePool>(std::max(1, options_.decode_threads));
    const std::size_t per_batch =
        static_cast<std::size_t>(std::max<std::int64_t>(options_.batch_size, 0) / chunks.rows_per_chunk()) + 1;
    // The chunks one batch of consecutive samples touches (at least 4), plus the floor asked for,
    // within 256 MiB unless the floor itself needs more.
    const std::size_t floor = static_cast<std::size_t>(std::max<std::int64_t>(0, options_.min_cached_chunks));
    const std::size_t budget = std::max(floor, (std::size_t{256} << 20) / chunks.chunk_bytes());
    capacity_ = std::min(std::max<std::size_t>(4, floor + per_batch), budget);
  }
  std::vector<unsigned char*> targets;
  for (const std::size_t chunk : missing) {
    Entry& entry = entries_[key(shard, chunk)];
    if (!spare_.empty()) {
      entry.bytes = std::move(spare_.back());
      spare_.pop_back();
    }
    entry.bytes.resize(chunks.chunk_bytes());
    entry.used = tick_;
    targets.push_back(entry.bytes.data());
  }
  try {
    pool_->run(missing.size(), [&](std::size_t i, std::vector<unsigned char>& scratch) {
      chunks.decode(missing[i], scratch, targets[i]);
    });
  } catch (...) {
    for (const std::size_t chunk : missing) {  // none half-decoded stays
      const auto entry = entries_.find(key(shard, chunk));
      spare_.push_back(std::move(entry->second.bytes));
      entries_.erase(entry);
    }
    throw;
  }
  return true;
}

const unsigned char* DecodedChunkCache::row(std::size_t shard, const CompressedChunks& chunks, std::int64_t row) const {
  const auto chunk = static_cast<std::size_t>(row / chunks.rows_per_chunk());
  return entries_.at(key(shard, chunk)).bytes.data() +
         static_cast<std::size_t>(row % chunks.rows_per_chunk()) * chunks.row_bytes();
}

void DecodedChunkCache::evict() {
  while (entries_.size() > capacity_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    if (spare_.size() < capacity_) spare_.push_back(std::move(oldest->second.bytes));
    entries_.erase(oldest);
  }
}

}  // namespace mnddp
