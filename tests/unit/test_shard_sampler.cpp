// DistributedSampler in shard mode (whole files per rank, greedy balancing, bounded shuffle buffer,
// equal step counts) and mid-epoch resume in both modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "mnddp/data/sampler.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::usage_error_of;

SamplerOptions shard_options(std::vector<std::int64_t> sizes, int world, int rank, std::int64_t batch,
                             std::int64_t buffer = 16, bool drop_last = true, bool shuffle = true) {
  SamplerOptions o;
  o.mode = PartitionMode::Shard;
  o.shard_sizes = std::move(sizes);
  o.world_size = world;
  o.rank = rank;
  o.batch_size = batch;
  o.shuffle_buffer = buffer;
  o.drop_last = drop_last;
  o.shuffle = shuffle;
  o.seed = 5;
  return o;
}

// Global index range [first, end) of each shard.
std::vector<std::pair<std::int64_t, std::int64_t>> shard_ranges(const std::vector<std::int64_t>& sizes) {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t first = 0;
  for (const auto size : sizes) {
    ranges.emplace_back(first, first + size);
    first += size;
  }
  return ranges;
}

TEST(ShardSampler, GreedyBalancingByHand) {
  // Largest first onto the least-loaded rank: 50->r0, 45->r1, 40->r2, 30->r2, 25->r1, 20->r0:
  // every rank holds 70 samples, so 70/8 = 8 full batches each.
  const std::vector<std::int64_t> sizes = {30, 50, 20, 45, 25, 40};
  DistributedSampler sampler(shard_options(sizes, 3, 0, 8));
  EXPECT_EQ(sampler.batches_per_epoch(), 8);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto assignment = sampler.shard_assignment(epoch);
    ASSERT_EQ(assignment.size(), 3u);
    std::multiset<std::size_t> dealt;
    for (const auto& shards : assignment) {
      std::int64_t load = 0;
      for (const auto s : shards) load += sizes[s];
      EXPECT_EQ(load, 70) << "epoch " << epoch;
      dealt.insert(shards.begin(), shards.end());
    }
    EXPECT_EQ(dealt, (std::multiset<std::size_t>{0, 1, 2, 3, 4, 5})) << "every shard dealt exactly once";
  }
}

TEST(ShardSampler, RanksAreDisjointReadOnlyTheirShardsAndRunEqualSteps) {
  const std::vector<std::int64_t> sizes = {100, 10, 10, 10, 33, 7, 21};  // uneven on purpose
  const auto ranges = shard_ranges(sizes);
  for (const int world : {2, 3}) {
    for (const std::int64_t epoch : {0, 4}) {
      std::set<std::int64_t> seen;
      std::set<std::size_t> lengths;
      for (int rank = 0; rank < world; ++rank) {
        DistributedSampler sampler(shard_options(sizes, world, rank, 4));
        const auto mine = sampler.epoch_indices(epoch);
        const auto shards = sampler.shard_assignment(epoch)[static_cast<std::size_t>(rank)];
        lengths.insert(mine.size());
        EXPECT_EQ(static_cast<std::int64_t>(mine.size()), sampler.batches_per_epoch() * 4);
        for (const auto i : mine) {
          EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " on two ranks";
          const bool from_mine = std::any_of(shards.begin(), shards.end(), [&](std::size_t s) {
            return i >= ranges[s].first && i < ranges[s].second;
          });
          EXPECT_TRUE(from_mine) << "rank " << rank << " read sample " << i << " outside its shards";
        }
      }
      EXPECT_EQ(lengths.size(), 1u) << world << " ranks would run different step counts";
    }
  }
}

TEST(ShardSampler, PaddingWrapsEachRankToTheMostLoadedRanksBatchCountAndCoversAll) {
  // Loads 100 (rank 0) and 30 (rank 1): padded, both run ceil(100/8) = 13 batches; rank 1 repeats
  // its own samples, never another rank's.
  const std::vector<std::int64_t> sizes = {100, 10, 10, 10};
  DistributedSampler zero(shard_options(sizes, 2, 0, 8, 16, /*drop_last=*/false));
  DistributedSampler one(shard_options(sizes, 2, 1, 8, 16, /*drop_last=*/false));
  EXPECT_EQ(zero.batches_per_epoch(), 13);
  const auto mine = one.epoch_indices(2);
  ASSERT_EQ(mine.size(), 104u);
  const std::set<std::int64_t> distinct(mine.begin(), mine.end());
  EXPECT_EQ(distinct, (std::set<std::int64_t>{mine.begin(), mine.begin() + 30}));
  EXPECT_EQ(*distinct.begin(), 100);
  EXPECT_EQ(*distinct.rbegin(), 129);
  // Together the ranks cover every sample of the epoch.
  std::set<std::int64_t> covered(distinct);
  for (const auto i : zero.epoch_indices(2)) covered.insert(i);
  EXPECT_EQ(covered.size(), 130u);
}

TEST(ShardSampler, DeterministicInSeedAndEpochAndDifferentAcrossEpochs) {
  const std::vector<std::int64_t> sizes(8, 10);
  const auto a = DistributedSampler(shard_options(sizes, 2, 1, 5));
  const auto b = DistributedSampler(shard_options(sizes, 2, 1, 5));
  EXPECT_EQ(a.epoch_indices(3), b.epoch_indices(3));
  EXPECT_NE(a.epoch_indices(3), a.epoch_indices(4));
  auto other_seed = shard_options(sizes, 2, 1, 5);
  other_seed.seed = 6;
  EXPECT_NE(a.epoch_indices(3), DistributedSampler(other_seed).epoch_indices(3));
  // Equal-sized shards: which rank reads which file changes between epochs.
  std::set<std::vector<std::size_t>> rank1_files;
  for (std::int64_t epoch = 0; epoch < 6; ++epoch) rank1_files.insert(a.shard_assignment(epoch)[1]);
  EXPECT_GT(rank1_files.size(), 1u);
}

TEST(ShardSampler, ShuffleBufferBoundsHowFarAheadASampleComesFrom) {
  // With buffer K, output position p holds a sample that entered the buffer at stream position
  // < p + K: reads stay within a window of K samples of each file.
  const std::vector<std::int64_t> sizes = {60, 60};
  for (const std::int64_t buffer : {1, 4, 16}) {
    DistributedSampler sampler(shard_options(sizes, 1, 0, 1, buffer));
    const auto files = sampler.shard_assignment(1)[0];
    std::vector<std::int64_t> stream;  // the order samples enter the buffer: file by file
    for (const auto s : files)
      for (std::int64_t i = 0; i < 60; ++i) stream.push_back(static_cast<std::int64_t>(s) * 60 + i);
    const auto order = sampler.epoch_indices(1);
    ASSERT_EQ(order.size(), 120u);
    for (std::size_t p = 0; p < order.size(); ++p) {
      const auto entered = std::find(stream.begin(), stream.end(), order[p]) - stream.begin();
      EXPECT_LT(entered, static_cast<std::ptrdiff_t>(p) + buffer) << "buffer " << buffer << " position " << p;
    }
    if (buffer == 1) {
      EXPECT_EQ(order, stream) << "a 1-sample buffer reads each file in order";
    }
  }
}

TEST(ShardSampler, WithoutShuffleFilesAreReadInOrder) {
  DistributedSampler sampler(shard_options({6, 6, 6, 6}, 2, 1, 3, 16, true, /*shuffle=*/false));
  // Sizes tie, so dealing follows index order: 0 -> rank 0, 1 -> rank 1, 2 -> rank 0, 3 -> rank 1.
  EXPECT_EQ(sampler.shard_assignment(0)[1], (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(sampler.epoch_indices(0), (std::vector<std::int64_t>{6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(sampler.epoch_indices(0), sampler.epoch_indices(7));
}

TEST(ShardSampler, TooFewShardsOrTooLittleDataNameBothPartitionModes) {
  auto message = usage_error_of([] { DistributedSampler(shard_options({50, 50}, 3, 0, 4)); });
  EXPECT_NE(message.find("--partition shard: 2 data files for 3 ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("--partition sample"), std::string::npos) << message;
  message = usage_error_of([] { DistributedSampler(shard_options({100, 5, 5}, 2, 1, 16)); });
  EXPECT_NE(message.find("gets 10 samples"), std::string::npos) << message;
  EXPECT_NE(message.find("--batch-size 16"), std::string::npos) << message;
  EXPECT_NE(message.find("--partition sample"), std::string::npos) << message;
  EXPECT_THROW(parse_choice_or_throw<PartitionMode>("files", "--partition"), UsageError);
  EXPECT_EQ(parse_choice_or_throw<PartitionMode>("shard", "--partition"), PartitionMode::Shard);
  EXPECT_EQ(choice_name(PartitionMode::Sample), "sample");
}

// --- mid-epoch resume --------------------------------------------------------------------------

TEST(SamplerResume, RestoreContinuesTheSameOrderInBothModes) {
  SamplerOptions sample;
  sample.num_samples = 203;
  sample.world_size = 3;
  sample.rank = 2;
  sample.batch_size = 7;
  sample.seed = 11;
  const SamplerOptions shard = shard_options({40, 70, 33, 60}, 2, 1, 6);
  for (const auto& options : {sample, shard}) {
    const DistributedSampler before(options);
    const std::int64_t batches = before.batches_per_epoch();
    const auto full = before.epoch_indices(5);
    for (const std::int64_t consumed : {std::int64_t{0}, std::int64_t{1}, batches / 2, batches}) {
      // A fresh sampler, as after a restart, resumes exactly where the saved position points.
      const DistributedSampler after(options);
      const auto rest = after.epoch_indices_from(SamplerPosition{5, consumed});
      EXPECT_EQ(rest, std::vector<std::int64_t>(full.begin() + consumed * options.batch_size, full.end()))
          << choice_name(options.mode) << " after " << consumed << " batches";
    }
    const auto message = usage_error_of([&] { before.epoch_indices_from(5, batches + 1); });
    EXPECT_NE(message.find(std::to_string(batches + 1)), std::string::npos) << message;
    EXPECT_THROW(before.epoch_indices_from(-1, 0), UsageError);
  }
}

TEST(SamplerResume, FingerprintChangesWithTheOrderButNotTheRank) {
  const auto base = shard_options({40, 70, 33, 60}, 2, 0, 6);
  auto other_rank = base;
  other_rank.rank = 1;
  auto other_batch = base;
  other_batch.batch_size = 5;
  auto other_buffer = base;
  other_buffer.shuffle_buffer = 17;
  auto sample_mode = base;
  sample_mode.mode = PartitionMode::Sample;
  sample_mode.num_samples = 203;
  const auto fingerprint = DistributedSampler(base).fingerprint();
  EXPECT_EQ(fingerprint, DistributedSampler(other_rank).fingerprint());
  EXPECT_NE(fingerprint, DistributedSampler(other_batch).fingerprint());
  EXPECT_NE(fingerprint, DistributedSampler(other_buffer).fingerprint());
  EXPECT_NE(fingerprint, DistributedSampler(sample_mode).fingerprint());
}

}  // namespace
}  // namespace mnddp
