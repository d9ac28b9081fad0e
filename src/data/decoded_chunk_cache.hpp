// DecodedChunkCache: H5Reader's decoded gzip/shuffle chunks, (shard, chunk) -> bytes, the least
// recently used evicted beyond the chunks one batch of consecutive samples touches (at least 4) plus
// H5ReaderOptions::min_cached_chunks: sequential reads and --shuffle-unit chunk's windows decode each
// chunk once. A batch's missing chunks are decoded together on a DecodePool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "compressed_chunks.hpp"
#include "decode_pool.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/default_init_allocator.hpp"

namespace mnddp {

class DecodedChunkCache {
 public:
  explicit DecodedChunkCache(const H5ReaderOptions& options) : options_(options) {}

  // The rows (sorted, distinct) one batch wants from one shard's compressed chunks.
  struct Wanted {
    std::size_t shard;
    CompressedChunks* chunks;
    std::span<const std::int64_t> rows;
  };
  // Makes every chunk holding one of the wanted rows decoded and cached, the missing ones of every
  // shard decoded together on the pool (a --shuffle-unit chunk window's chunks lie in many shards).
  // Returns per entry of `wanted` whether its rows are there: false when one of its chunks was never
  // written (HDF5 reads those rows). A decode error leaves no half-decoded chunk behind.
  std::vector<bool> decode(std::span<const Wanted> wanted);
  // Row `row` of shard `shard`, from a chunk the last decode() made current.
  const unsigned char* row(std::size_t shard, const CompressedChunks& chunks, std::int64_t row) const;
  // Evicts the least recently used chunks beyond the cache's size; call after copying a batch out.
  void evict();

 private:
  using ChunkBytes = std::vector<unsigned char, DefaultInitAllocator<unsigned char>>;
  struct Entry {
    ChunkBytes bytes;
    std::uint64_t used = 0;
  };
  static std::uint64_t key(std::size_t shard, std::size_t chunk) { return (std::uint64_t{shard} << 40) | chunk; }

  H5ReaderOptions options_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  // Buffers of evicted chunks, reused: a fresh megabyte per chunk cost more in page faults than
  // the inflate itself.
  std::vector<ChunkBytes> spare_;
  std::uint64_t tick_ = 0;
  std::size_t capacity_ = 4;
  // Sets capacity_ and makes the pool, on the first decode (a chunk's size is known then).
  void start(const CompressedChunks& chunks);
  std::unique_ptr<DecodePool> pool_;  // made on the first decode
};

}  // namespace mnddp
