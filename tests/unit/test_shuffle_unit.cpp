// --shuffle-unit chunk: the HDF5 chunks are dealt to ranks and each rank shuffles the samples of
// --shuffle-window chunks at a time. Every sample is read at most once per epoch, ranks are
// disjoint with equal step counts, each chunk's samples stay inside one window of the rank's order
// (so it is decoded once per epoch), the order changes between epochs, and --partition shard is
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "mnddp/config.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/train/module_options.hpp"
#include "test_support.hpp"

using namespace mnddp;
using testing_support::usage_error_of;

namespace {

// 100 samples in chunks of 7 (an edge chunk of 2) and 50 in chunks of 10.
ShardIndex chunked_index() {
  ShardIndex index;
  index.shards = {{"a.h5", 100, 0, 9, 7}, {"b.h5", 50, 0, 9, 10}};
  index.sample_shape = {4};
  return index;
}

std::int64_t chunk_of(std::int64_t sample) { return sample < 100 ? sample / 7 : 100 + (sample - 100) / 10; }

TEST(ShuffleUnitChunk, DealsChunksAndShufflesWithinWindows) {
  TrainingConfig config;
  config.batch_size = 8;
  config.shuffle_unit = ShuffleUnit::Chunk;
  config.shuffle_window = 3;
  const ShardIndex index = chunked_index();
  for (const int world : {1, 2, 3}) {
    std::set<std::int64_t> seen;
    std::int64_t batches = -1;
    for (int r = 0; r < world; ++r) {
      RankInfo rank;
      rank.rank = r;
      rank.world_size = world;
      const DistributedSampler sampler(sampler_options(config, index, rank));
      if (batches < 0) batches = sampler.batches_per_epoch();
      EXPECT_EQ(sampler.batches_per_epoch(), batches) << "equal step counts";
      const auto order = sampler.epoch_indices(0);
      EXPECT_NE(order, sampler.epoch_indices(1)) << "a new order each epoch";
      EXPECT_EQ(static_cast<std::int64_t>(order.size()), batches * config.batch_size);
      for (const auto i : order) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " read twice";
      // Each chunk's samples lie within one window: between its first and last sample of this rank's
      // order there are at most 3 chunks' worth (3 x 10) of positions.
      std::map<std::int64_t, std::pair<std::size_t, std::size_t>> span;
      for (std::size_t p = 0; p < order.size(); ++p) {
        auto [it, fresh] = span.try_emplace(chunk_of(order[p]), p, p);
        it->second.second = p;
      }
      for (const auto& [chunk, where] : span)
        EXPECT_LT(where.second - where.first, 30u) << "chunk " << chunk << " spread over its rank's order";
      // Shuffled inside the window: not in file order.
      EXPECT_FALSE(std::is_sorted(order.begin(), order.begin() + 16));
    }
    EXPECT_GE(static_cast<std::int64_t>(seen.size()), 150 - world * 2 * config.batch_size) << world << " ranks";
  }
}

TEST(ShuffleUnitChunk, RefusesPartitionShard) {
  TrainingConfig config;
  config.shuffle_unit = ShuffleUnit::Chunk;
  config.partition = PartitionMode::Shard;
  RankInfo rank;
  EXPECT_NE(usage_error_of([&] { sampler_options(config, chunked_index(), rank); }).find("--shuffle-unit chunk"),
            std::string::npos);
}

}  // namespace
