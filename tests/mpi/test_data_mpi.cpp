// The data pipeline across real ranks: rank 0 scans and broadcasts the shard index, failures are
// collective, per-rank training slices are disjoint and equal, and the Loader returns what a
// direct read returns.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

constexpr std::int64_t kTrainSamples = 1000;
constexpr std::int64_t kValSamples = 101;

class DataMpi : public ::testing::Test {
 protected:
  // Rank 0 writes one synthetic dataset for the whole suite; the others learn where it is.
  static void SetUpTestSuite() {
    h5_silence_default_errors();
    comm_ = std::make_unique<MpiComm>();
    on_root_then_agree(*comm_, [] {
      dir_ = std::make_unique<testing_support::TempDir>("mnddp-data-mpi");
      SynthOptions options;
      options.out_dir = dir_->path().string();
      options.train_samples = kTrainSamples;
      options.val_samples = kValSamples;
      options.shards = 4;
      options.shape = {2, 4};
      options.num_classes = 5;
      write_synthetic_classification(options);
      data_dir_ = options.out_dir;
    });
    broadcast_string(*comm_, data_dir_);
  }

  static void TearDownTestSuite() {
    comm_->barrier();  // nobody is still reading when rank 0 removes the files
    dir_.reset();
    comm_.reset();
  }

  ShardIndex train_index() {
    return scan_shards_collective(*comm_, data_dir_ + "/train_*.h5", "--train-data", "x", "y");
  }

  static std::unique_ptr<MpiComm> comm_;
  static std::unique_ptr<testing_support::TempDir> dir_;
  static std::string data_dir_;
};

std::unique_ptr<MpiComm> DataMpi::comm_;
std::unique_ptr<testing_support::TempDir> DataMpi::dir_;
std::string DataMpi::data_dir_;

TEST_F(DataMpi, EveryRankGetsTheSameShardIndex) {
  const ShardIndex index = train_index();
  EXPECT_EQ(index.num_samples(), kTrainSamples);
  EXPECT_EQ(index.shards.size(), 4u);
  EXPECT_EQ(index.sample_shape, (std::vector<std::int64_t>{2, 4}));
  const auto all = allgather_strings(*comm_, index.serialize());
  for (int r = 1; r < comm_->size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r << " differs from rank 0";
}

TEST_F(DataMpi, AMissingFileFailsOnEveryRankWithOneCollectiveUsageError) {
  const std::string missing = data_dir_ + "/nope.h5";
  std::int64_t threw = 0;
  try {
    scan_shards_collective(*comm_, missing, "--train-data", "x", "y");
  } catch (const Error& e) {
    threw = 1;
    EXPECT_TRUE(e.collective());
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("--train-data: file not found: '" + missing + "'"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(allreduce_sum(*comm_, threw), comm_->size()) << "every rank must throw";
}

TEST_F(DataMpi, TrainingSlicesAreDisjointAndEqualAcrossRanks) {
  const int world = comm_->size();
  for (bool drop_last : {true, false}) {
    SamplerOptions options;
    options.num_samples = kTrainSamples;
    options.world_size = world;
    options.rank = comm_->rank();
    options.batch_size = 7;
    options.seed = 99;
    options.drop_last = drop_last;
    const auto mine = DistributedSampler(options).epoch_indices(3);
    const auto n = static_cast<std::int64_t>(mine.size());
    ASSERT_EQ(allreduce_min(*comm_, n), allreduce_max(*comm_, n)) << "ranks would run different step counts";
    std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(world));
    comm_->allgather(mine.data(), all.data(), mine.size(), DType::I64);

    const std::int64_t global_batch = 7 * world;
    const std::int64_t steps =
        drop_last ? kTrainSamples / global_batch : (kTrainSamples + global_batch - 1) / global_batch;
    EXPECT_EQ(static_cast<std::int64_t>(all.size()), steps * global_batch);
    const std::set<std::int64_t> distinct(all.begin(), all.end());
    if (drop_last) {
      EXPECT_EQ(distinct.size(), all.size()) << "a sample went to two ranks";
    } else {
      EXPECT_EQ(static_cast<std::int64_t>(distinct.size()), kTrainSamples) << "padding must cover every sample";
    }
    EXPECT_GE(*distinct.begin(), 0);
    EXPECT_LT(*distinct.rbegin(), kTrainSamples);
  }
}

TEST_F(DataMpi, ShardModeGivesEachRankWholeFilesDisjointlyWithEqualSteps) {
  const ShardIndex index = train_index();
  SamplerOptions options;
  options.mode = PartitionMode::Shard;
  options.shard_sizes = index.shard_sizes();
  options.world_size = comm_->size();
  options.rank = comm_->rank();
  options.batch_size = 7;
  options.seed = 3;
  options.shuffle_buffer = 64;
  const DistributedSampler sampler(options);
  for (const std::int64_t epoch : {0, 1}) {
    const auto mine = sampler.epoch_indices(epoch);
    const auto n = static_cast<std::int64_t>(mine.size());
    ASSERT_EQ(allreduce_min(*comm_, n), allreduce_max(*comm_, n)) << "ranks would run different step counts";
    EXPECT_EQ(n, sampler.batches_per_epoch() * 7);
    // Every sample comes from a file dealt to this rank, and no file is read by two ranks.
    const auto files = sampler.shard_assignment(epoch)[static_cast<std::size_t>(comm_->rank())];
    for (const auto i : mine) {
      const std::size_t file = index.locate(i).first;
      EXPECT_NE(std::find(files.begin(), files.end(), file), files.end()) << "sample " << i << " from file " << file;
    }
    std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(comm_->size()));
    comm_->allgather(mine.data(), all.data(), mine.size(), DType::I64);
    EXPECT_EQ(std::set<std::int64_t>(all.begin(), all.end()).size(), all.size()) << "a sample went to two ranks";
  }
}

TEST_F(DataMpi, EvaluationSplitCountsEverySampleOnce) {
  const auto mine = eval_indices(kValSamples, comm_->size(), comm_->rank());
  const std::int64_t count = allreduce_sum(*comm_, static_cast<std::int64_t>(mine.size()));
  const std::int64_t sum = allreduce_sum(*comm_, std::accumulate(mine.begin(), mine.end(), std::int64_t{0}));
  EXPECT_EQ(count, kValSamples);
  EXPECT_EQ(sum, kValSamples * (kValSamples - 1) / 2);
}

TEST_F(DataMpi, LoaderBatchesMatchADirectRead) {
  const ShardIndex index = train_index();
  SamplerOptions options;
  options.num_samples = index.num_samples();
  options.world_size = comm_->size();
  options.rank = comm_->rank();
  options.batch_size = 16;
  options.drop_last = false;
  DistributedSampler sampler(options);
  const auto indices = sampler.epoch_indices(1);

  H5Reader reader(index);
  Loader loader(reader, indices, options.batch_size, 3);
  EXPECT_EQ(loader.num_batches(), sampler.batches_per_epoch());
  H5Reader direct(index);
  const auto numel = static_cast<std::size_t>(index.sample_numel());
  std::int64_t batches = 0;
  std::int64_t samples = 0;
  while (auto batch = loader.next()) {
    const auto first = indices.begin() + batches * options.batch_size;
    ASSERT_TRUE(std::equal(batch->ids.begin(), batch->ids.end(), first)) << "batch " << batches;
    std::vector<float> x(batch->ids.size() * numel);
    std::vector<std::int64_t> y(batch->ids.size());
    direct.read(batch->ids, x.data(), y.data());
    EXPECT_EQ(batch->y, y) << "batch " << batches;
    EXPECT_EQ(batch->x, x) << "batch " << batches;
    for (auto label : batch->y) EXPECT_TRUE(label >= 0 && label < 5) << label;
    ++batches;
    samples += batch->size;
  }
  EXPECT_EQ(batches, sampler.batches_per_epoch());
  EXPECT_EQ(allreduce_sum(*comm_, samples), sampler.batches_per_epoch() * options.batch_size * comm_->size());
}

}  // namespace
}  // namespace mnddp
