// Which part of the model each rank updates under ZeRO (--zero 1|2): every gradient bucket's flat
// range, padded to a multiple of the world size, is cut into one equal chunk per rank, as a
// reduce-scatter leaves it. A parameter may straddle chunks; each rank's share of it is a "piece".
// Pure arithmetic on sizes, no torch, so the layout can be tested on its own (tests/unit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mnddp {

// One contiguous run of one parameter that one rank owns: elements [param_offset, param_offset +
// length) of the parameter in its memory order (a bucket slot's order), which sit at chunk_offset
// in that rank's chunk of the bucket.
struct ShardPiece {
  std::size_t param = 0;
  std::int64_t param_offset = 0;
  std::int64_t length = 0;
  std::size_t bucket = 0;
  std::int64_t chunk_offset = 0;
};

class ShardLayout {
 public:
  // Chunks are rounded up to this many elements, so every rank's chunk starts 128-byte aligned
  // (float32) inside the padded bucket.
  static constexpr std::int64_t kChunkAlign = 32;

  // `buckets`: parameter indices in the order they fill each bucket (Reducer::bucket_members());
  // `numel`: every parameter's element count, by index.
  ShardLayout(const std::vector<std::vector<std::size_t>>& buckets, const std::vector<std::int64_t>& numel, int world);

  int world() const { return world_; }
  std::size_t bucket_count() const { return elements_.size(); }
  std::int64_t bucket_elements(std::size_t bucket) const { return elements_[bucket]; }  // unpadded
  std::int64_t chunk(std::size_t bucket) const { return chunk_[bucket]; }
  std::int64_t padded(std::size_t bucket) const { return chunk_[bucket] * world_; }
  // Where a parameter starts in its bucket (elements).
  std::size_t bucket_of(std::size_t param) const { return bucket_of_[param]; }
  std::int64_t offset_in_bucket(std::size_t param) const { return offset_[param]; }

  // Rank `rank`'s pieces, bucket by bucket, in chunk order.
  std::vector<ShardPiece> pieces(int rank) const;
  // The elements rank `rank` owns (padding excluded): the sum of its pieces' lengths.
  std::int64_t owned_elements(int rank) const;

 private:
  int world_;
  std::vector<std::vector<std::size_t>> members_;
  std::vector<std::int64_t> numel_;
  std::vector<std::int64_t> elements_;
  std::vector<std::int64_t> chunk_;
  std::vector<std::size_t> bucket_of_;
  std::vector<std::int64_t> offset_;
};

}  // namespace mnddp
