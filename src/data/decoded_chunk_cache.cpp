// DecodedChunkCache: decoding a batch's missing chunks (of every shard) on the pool together, and
// least-recently-used eviction.
#include "decoded_chunk_cache.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace mnddp {

void DecodedChunkCache::start(const CompressedChunks& chunks) {
  pool_ = std::make_unique<DecodePool>(std::max(1, options_.decode_threads));
  const std::size_t per_batch =
      static_cast<std::size_t>(std::max<std::int64_t>(options_.batch_size, 0) / chunks.rows_per_chunk()) + 1;
  // The chunks one batch of consecutive samples touches (at least 4), plus the floor asked for,
  // within 256 MiB unless the floor itself needs more.
  const std::size_t floor = static_cast<std::size_t>(std::max<std::int64_t>(0, options_.min_cached_chunks));
  const std::size_t budget = std::max(floor, (std::size_t{256} << 20) / chunks.chunk_bytes());
  capacity_ = std::min(std::max<std::size_t>(4, floor + per_batch), budget);
}

std::vector<bool> DecodedChunkCache::decode(std::span<const Wanted> wanted) {
  struct Missing {
    std::uint64_t key;
    const CompressedChunks* chunks;
    std::size_t chunk;
    unsigned char* target = nullptr;
  };
  std::vector<Missing> missing;
  std::vector<bool> present(wanted.size(), true);
  ++tick_;
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    const std::size_t first_missing = missing.size();
    std::size_t last = SIZE_MAX;
    for (const std::int64_t row : wanted[w].rows) {
      const auto chunk = static_cast<std::size_t>(row / wanted[w].chunks->rows_per_chunk());
      if (chunk == last) continue;
      last = chunk;
      if (!wanted[w].chunks->locate(chunk)) {
        present[w] = false;  // this shard's rows go through HDF5; its other chunks are not needed
        missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(first_missing), missing.end());
        break;
      }
      const auto found = entries_.find(key(wanted[w].shard, chunk));
      if (found != entries_.end())
        found->second.used = tick_;
      else
        missing.push_back({key(wanted[w].shard, chunk), wanted[w].chunks, chunk});
    }
  }
  if (missing.empty()) return present;
  if (!pool_) start(*missing.front().chunks);
  for (Missing& m : missing) {
    Entry& entry = entries_[m.key];
    if (!spare_.empty()) {
      entry.bytes = std::move(spare_.back());
      spare_.pop_back();
    }
    entry.bytes.resize(m.chunks->chunk_bytes());
    entry.used = tick_;
    m.target = entry.bytes.data();
  }
  try {
    pool_->run(missing.size(), [&](std::size_t i, std::vector<unsigned char>& scratch) {
      missing[i].chunks->decode(missing[i].chunk, scratch, missing[i].target);
    });
  } catch (...) {
    for (const Missing& m : missing) {  // none half-decoded stays
      const auto entry = entries_.find(m.key);
      spare_.push_back(std::move(entry->second.bytes));
      entries_.erase(entry);
    }
    throw;
  }
  return present;
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
