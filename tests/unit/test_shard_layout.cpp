// ZeRO's shard layout: every element of every parameter is owned by exactly one rank, chunks are
// equal and aligned, and a parameter that straddles two chunks is split where the chunk ends.
#include <gtest/gtest.h>

#include <numeric>

#include "mnddp/zero/shard_layout.hpp"

using namespace mnddp;

namespace {

// Every parameter element owned exactly once across the ranks, at the place the bucket puts it.
void expect_partition(const ShardLayout& layout, const std::vector<std::vector<std::size_t>>& buckets,
                      const std::vector<std::int64_t>& numel) {
  std::vector<std::vector<int>> owner(numel.size());
  for (std::size_t p = 0; p < numel.size(); ++p) owner[p].assign(static_cast<std::size_t>(numel[p]), -1);
  for (int rank = 0; rank < layout.world(); ++rank) {
    for (const ShardPiece& piece : layout.pieces(rank)) {
      EXPECT_GT(piece.length, 0);
      EXPECT_LE(piece.chunk_offset + piece.length, layout.chunk(piece.bucket));
      // The piece's place in the padded bucket is the parameter's own place there.
      EXPECT_EQ(layout.chunk(piece.bucket) * rank + piece.chunk_offset,
                layout.offset_in_bucket(piece.param) + piece.param_offset);
      for (std::int64_t i = 0; i < piece.length; ++i) {
        int& slot = owner[piece.param][static_cast<std::size_t>(piece.param_offset + i)];
        EXPECT_EQ(slot, -1) << "parameter " << piece.param << " element " << piece.param_offset + i << " owned twice";
        slot = rank;
      }
    }
  }
  for (std::size_t p = 0; p < numel.size(); ++p)
    for (int who : owner[p]) ASSERT_NE(who, -1) << "parameter " << p << " has an element nobody owns";
  std::int64_t owned = 0;
  for (int rank = 0; rank < layout.world(); ++rank) owned += layout.owned_elements(rank);
  EXPECT_EQ(owned, std::accumulate(numel.begin(), numel.end(), std::int64_t{0}));
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_EQ(layout.chunk(b) % ShardLayout::kChunkAlign, 0);
    EXPECT_GE(layout.padded(b), layout.bucket_elements(b));
    EXPECT_LT(layout.padded(b) - layout.bucket_elements(b), layout.world() * ShardLayout::kChunkAlign);
  }
}

}  // namespace

TEST(ShardLayout, EveryElementHasExactlyOneOwner) {
  const std::vector<std::int64_t> numel = {1000, 10, 333, 1, 4096, 77};
  const std::vector<std::vector<std::size_t>> buckets = {{5, 4}, {3, 2, 1}, {0}};
  for (int world : {1, 2, 3, 4, 7, 64}) {
    SCOPED_TRACE(world);
    expect_partition(ShardLayout(buckets, numel, world), buckets, numel);
  }
}

TEST(ShardLayout, AParameterStraddlingTwoChunksIsSplitWhereTheChunkEnds) {
  // One bucket of 40 + 60 = 100 elements on 2 ranks: chunks of 64 (50 rounded up to 32s). The
  // second parameter starts at 40 and crosses the boundary at 64: 24 elements on rank 0, 36 on 1.
  const ShardLayout layout({{0, 1}}, {40, 60}, 2);
  ASSERT_EQ(layout.chunk(0), 64);
  const auto zero = layout.pieces(0);
  ASSERT_EQ(zero.size(), 2u);
  EXPECT_EQ(zero[1].param, 1u);
  EXPECT_EQ(zero[1].param_offset, 0);
  EXPECT_EQ(zero[1].length, 24);
  EXPECT_EQ(zero[1].chunk_offset, 40);
  const auto one = layout.pieces(1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].param, 1u);
  EXPECT_EQ(one[0].param_offset, 24);
  EXPECT_EQ(one[0].length, 36);
  EXPECT_EQ(one[0].chunk_offset, 0);
  EXPECT_EQ(layout.owned_elements(0) + layout.owned_elements(1), 100);
}

TEST(ShardLayout, RanksBeyondTheDataOwnNothing) {
  // 33 elements on 4 ranks: one 32-element chunk each; ranks 2 and 3 hold only padding.
  const ShardLayout layout({{0}}, {33}, 4);
  EXPECT_EQ(layout.owned_elements(0), 32);
  EXPECT_EQ(layout.owned_elements(1), 1);
  EXPECT_TRUE(layout.pieces(2).empty());
  EXPECT_TRUE(layout.pieces(3).empty());
}

TEST(ShardLayout, RejectsAParameterInTwoBuckets) {
  EXPECT_THROW(ShardLayout({{0}, {0}}, {4}, 2), std::invalid_argument);
}
