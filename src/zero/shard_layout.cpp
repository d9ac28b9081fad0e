// ZeRO's chunks and pieces: interval arithmetic over the buckets' flat ranges.
#include "mnddp/zero/shard_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace mnddp {

ShardLayout::ShardLayout(const std::vector<std::vector<std::size_t>>& buckets, const std::vector<std::int64_t>& numel,
                         int world)
    : world_(world), members_(buckets), numel_(numel) {
  if (world < 1) throw std::invalid_argument("ShardLayout: the world size must be at least 1");
  bucket_of_.assign(numel.size(), 0);
  offset_.assign(numel.size(), -1);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::int64_t elements = 0;
    for (std::size_t param : buckets[b]) {
      if (param >= numel.size() || offset_[param] >= 0)
        throw std::invalid_argument("ShardLayout: a parameter is missing from the sizes or in two buckets");
      bucket_of_[param] = b;
      offset_[param] = elements;
      elements += numel[param];
    }
    const std::int64_t per_rank = (elements + world - 1) / world;
    elements_.push_back(elements);
    chunk_.push_back((per_rank + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
  }
}

std::vector<ShardPiece> ShardLayout::pieces(int rank) const {
  std::vector<ShardPiece> out;
  for (std::size_t b = 0; b < members_.size(); ++b) {
    const std::int64_t begin = chunk_[b] * rank;
    const std::int64_t end = begin + chunk_[b];
    for (std::size_t param : members_[b]) {
      const std::int64_t first = std::max(begin, offset_[param]);
      const std::int64_t last = std::min(end, offset_[param] + numel_[param]);
      if (first >= last) continue;
      out.push_back({param, first - offset_[param], last - first, b, first - begin});
    }
  }
  return out;
}

std::int64_t ShardLayout::owned_elements(int rank) const {
  std::int64_t total = 0;
  for (const ShardPiece& piece : pieces(rank)) total += piece.length;
  return total;
}

}  // namespace mnddp
