// Loader (prefetch order, early stop, errors reaching the consumer, transforms applied in its
// thread) and the synthetic dataset writer, on small shards from tests/support/h5_fixtures.hpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

#include "h5_fixtures.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/data/transforms.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::ShardSpec;
using testing_support::TempDir;
using testing_support::value_of;
using testing_support::write_shard;

// --- Loader ------------------------------------------------------------------------------------

ShardIndex two_shards(const TempDir& dir) {
  ShardSpec first;
  first.count = 7;
  ShardSpec second;
  second.first = 7;
  second.count = 6;
  return testing_support::two_shards(dir, first, second, "l0.h5", "l1.h5");
}

TEST(Loader, DeliversEveryBatchInOrderWithAShortLastBatch) {
  TempDir dir("mnddp-loader");
  H5Reader reader(two_shards(dir));
  std::vector<std::int64_t> order = {12, 0, 7, 3, 3, 9, 1, 11, 6, 2, 8};
  Loader loader(reader, order, 4, 2);
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<std::int64_t> seen;
  while (auto batch = loader.next()) {
    EXPECT_EQ(batch->shape, (std::vector<std::int64_t>{batch->size, 2, 3}));
    for (std::int64_t i = 0; i < batch->size; ++i) {
      EXPECT_EQ(batch->y[i], batch->ids[i] * 10 + 1);
      EXPECT_EQ(batch->x[i * 6 + 5], static_cast<float>(value_of(batch->ids[i], 5, true, true)));
    }
    seen.insert(seen.end(), batch->ids.begin(), batch->ids.end());
  }
  EXPECT_EQ(seen, order);
  EXPECT_FALSE(loader.next().has_value());
}

// An asynchronous checkpoint commit holds hdf5_mutex() across its collective MPI-IO waits (HDF5 1.10 is
// not thread-safe: every call into it holds the one lock, and a collective write waits inside HDF5
// for the slowest rank). The loader must not stall behind it: once a shard is open and its chunks
// located, rows come from pread (contiguous and unfiltered chunks, and gzip chunks decoded by mnddp)
// and labels from the copy read at open, with no HDF5 call.
TEST(Loader, ReadsWhileACommitHoldsTheHdf5Lock) {
  TempDir dir("mnddp-loader");
  ShardSpec contiguous;
  contiguous.count = 7;
  ShardSpec gzip;
  gzip.first = 7;
  gzip.count = 40;  // 20 chunks of 2 rows: more than the decoded-chunk cache keeps, so they are read again
  gzip.gzip_chunks = true;
  H5Reader reader(testing_support::two_shards(dir, contiguous, gzip, "plain.h5", "gzip.h5"));
  std::vector<std::int64_t> order(47);
  std::iota(order.begin(), order.end(), 0);
  const auto read_all = [&] {
    std::vector<std::int64_t> ids;
    Loader loader(reader, order, 4, 2);
    while (auto batch = loader.next()) ids.insert(ids.end(), batch->ids.begin(), batch->ids.end());
    return ids;
  };
  ASSERT_EQ(read_all(), order);  // opens both shards and locates their chunks

  std::atomic<bool> held{false}, release{false};
  std::thread commit([&] {
    std::lock_guard lock(hdf5_mutex());
    held = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto reading = std::async(std::launch::async, read_all);
  const bool done = reading.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  release = true;
  commit.join();
  EXPECT_TRUE(done) << "the loader waited for the HDF5 lock";
  EXPECT_EQ(reading.get(), order);
}

TEST(Loader, StoppingEarlyDoesNotHang) {
  TempDir dir("mnddp-loader");
  H5Reader reader(two_shards(dir));
  std::vector<std::int64_t> order(1000, 5);
  Loader loader(reader, order, 1, 1);
  ASSERT_TRUE(loader.next().has_value());
}  // the destructor must stop the thread blocked on a full queue

TEST(Loader, ReaderErrorsReachTheConsumerAfterTheGoodBatches) {
  TempDir dir("mnddp-loader");
  ShardIndex index = two_shards(dir);
  std::filesystem::remove(dir.file("l1.h5"));  // shard 1 (samples 7..12) is gone
  H5Reader reader(index);
  Loader loader(reader, {0, 1, 2, 8}, 2, 4);
  ASSERT_TRUE(loader.next().has_value());
  try {
    loader.next();
    ADD_FAILURE() << "no error from a deleted shard";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("l1.h5")), std::string::npos) << e.what();
  }
}

// --- synthetic data ----------------------------------------------------------------------------

TEST(Synth, WritesDeterministicLearnableShardsAndRefusesToOverwrite) {
  TempDir dir("mnddp-synth");
  SynthOptions options;
  options.out_dir = dir.file("a");
  options.train_samples = 50;
  options.val_samples = 9;
  options.shards = 3;
  options.shape = {4, 2};
  options.num_classes = 3;
  const auto files = write_synthetic_classification(options);
  ASSERT_EQ(files.size(), 4u);  // 3 train + max(1, 3/2) = 1 val
  EXPECT_EQ(std::filesystem::path(files[0]).filename(), "train_000.h5");
  EXPECT_EQ(std::filesystem::path(files[3]).filename(), "val_000.h5");
  const ShardIndex train = scan_shards(expand_data_paths(options.out_dir + "/train_*.h5", "--train-data"), "x", "y");
  EXPECT_EQ(train.num_samples(), 50);
  EXPECT_EQ(train.sample_shape, (std::vector<std::int64_t>{4, 2}));

  options.out_dir = dir.file("b");
  options.shards = 2;  // a different split into files must not change the samples
  write_synthetic_classification(options);
  const ShardIndex again = scan_shards(expand_data_paths(options.out_dir + "/train_*.h5", "--train-data"), "x", "y");
  std::vector<std::int64_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> x1(50 * 8), x2(50 * 8);
  std::vector<std::int64_t> y1(50), y2(50);
  H5Reader(train).read(all, x1.data(), y1.data());
  H5Reader(again).read(all, x2.data(), y2.data());
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(y1, y2);
  for (auto label : y1) EXPECT_TRUE(label >= 0 && label < 3) << label;

  try {
    write_synthetic_classification(options);
    ADD_FAILURE() << "overwrote without --overwrite";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--overwrite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("b")), std::string::npos) << e.what();
  }
  options.overwrite = true;
  options.shards = 1;
  EXPECT_EQ(write_synthetic_classification(options).size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("b/train_001.h5")));  // stale shards are removed
}

TEST(Loader, ScalesUint8InputsByDefaultAndNotWhenTurnedOff) {
  TempDir dir("mnddp-loader");
  ShardSpec spec;
  spec.x_type = H5T_STD_U8LE;
  spec.is_signed = false;
  spec.fractional = false;
  write_shard(dir.file("u8.h5"), spec);
  H5Reader reader(scan_shards({dir.file("u8.h5")}, "x", "y"));
  Loader scaled(reader, {3, 1}, 2, 1);
  EXPECT_EQ(scaled.transform().describe(), "uint8 / 255");
  const auto batch = scaled.next();
  ASSERT_TRUE(batch.has_value());
  for (std::int64_t j = 0; j < 6; ++j)
    EXPECT_FLOAT_EQ(batch->x[static_cast<std::size_t>(j)], static_cast<float>(value_of(3, j, false, false)) / 255.0f);

  LoaderOptions raw;
  raw.transforms.scale_uint8 = false;
  Loader unscaled(reader, {3}, 1, raw);
  EXPECT_TRUE(unscaled.transform().is_identity());
  EXPECT_EQ(unscaled.next()->x[5], static_cast<float>(value_of(3, 5, false, false)));
}

TEST(Loader, NormalisesWithFeatureStatsInsteadOfScaling) {
  TempDir dir("mnddp-loader");
  ShardSpec spec;
  spec.x_type = H5T_STD_U8LE;
  spec.is_signed = false;
  spec.fractional = false;
  write_shard(dir.file("u8.h5"), spec);
  H5Reader reader(scan_shards({dir.file("u8.h5")}, "x", "y"));
  FeatureStats stats;
  stats.path = "stats.json";
  stats.mean = {1, 2, 3, 4, 5, 6};
  stats.stddev = {2, 2, 2, 2, 2, 0};  // the last feature is constant: its std is floored
  LoaderOptions options;
  options.transforms.feature_stats = stats;
  Loader loader(reader, {4}, 1, options);
  EXPECT_EQ(loader.transform().describe(), "normalise by 'stats.json'");
  const auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  for (std::size_t j = 0; j < 5; ++j)
    EXPECT_FLOAT_EQ(batch->x[j], (static_cast<float>(value_of(4, static_cast<std::int64_t>(j), false, false)) -
                                  static_cast<float>(stats.mean[j])) /
                                     2.0f);
  EXPECT_FLOAT_EQ(batch->x[5], (static_cast<float>(value_of(4, 5, false, false)) - 6.0f) * 1e6f);

  stats.mean.pop_back();
  stats.stddev.pop_back();
  options.transforms.feature_stats = stats;
  try {
    Loader wrong(reader, {0}, 1, options);
    ADD_FAILURE() << "5 features accepted for samples of 6";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'stats.json': 5 features, but the data's samples have 6 ([2, 3])"),
              std::string::npos)
        << e.what();
  }
}

TEST(Loader, NonFiniteInputsStopTheConsumerWithFileDatasetAndSample) {
  TempDir dir("mnddp-loader");
  ShardSpec spec;
  spec.count = 6;
  spec.nonfinite_sample = 4;
  write_shard(dir.file("nan.h5"), spec);
  H5Reader reader(scan_shards({dir.file("nan.h5")}, "x", "y"));
  Loader loader(reader, {0, 1, 4, 5}, 2, 2);
  ASSERT_TRUE(loader.next().has_value());
  try {
    loader.next();
    ADD_FAILURE() << "NaN input passed under the default policy";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + dir.file("nan.h5") +
                           "': dataset 'x' sample 4 holds a non-finite input (nan at "
                           "element 1)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("--nonfinite-inputs"), std::string::npos) << message;
  }
}

// Mean squared residual of the least-squares fit y ~ X w (normal equations, Gaussian elimination).
double least_squares_residual(const std::vector<float>& x, const std::vector<float>& y, std::size_t features) {
  const std::size_t n = y.size();
  std::vector<std::vector<double>> a(features, std::vector<double>(features + 1, 0.0));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t r = 0; r < features; ++r) {
      for (std::size_t c = 0; c < features; ++c) a[r][c] += double{x[i * features + r]} * x[i * features + c];
      a[r][features] += double{x[i * features + r]} * y[i];
    }
  for (std::size_t p = 0; p < features; ++p)
    for (std::size_t r = 0; r < features; ++r) {
      if (r == p) continue;
      const double f = a[r][p] / a[p][p];
      for (std::size_t c = p; c <= features; ++c) a[r][c] -= f * a[p][c];
    }
  double squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double fit = 0.0;
    for (std::size_t r = 0; r < features; ++r) fit += a[r][features] / a[r][r] * x[i * features + r];
    squares += (y[i] - fit) * (y[i] - fit);
  }
  return squares / static_cast<double>(n);
}

TEST(Synth, RegressionTargetsAreFloatAndLinearInTheInputsPlusNoise) {
  TempDir dir("mnddp-synth");
  SynthOptions options;
  options.task = SynthTask::Regression;
  options.train_samples = 400;
  options.val_samples = 0;
  options.shards = 2;
  options.shape = {8};
  for (const double noise : {0.0, 0.5}) {
    options.noise = noise;
    options.out_dir = dir.file(noise == 0.0 ? "exact" : "noisy");
    const auto files = write_synthetic_dataset(options);
    ASSERT_EQ(files.size(), 2u);
    EXPECT_THROW(scan_shards(files, "x", "y"), UsageError);  // the trainer's scan wants class labels
    const ShardIndex index = scan_shards(files, "x", "y", LabelKind::Value);
    EXPECT_EQ(index.label_type, SampleType::F32);
    EXPECT_FALSE(index.has_class_labels());
    std::vector<std::int64_t> all(400);
    std::iota(all.begin(), all.end(), 0);
    std::vector<float> x(400 * 8), y(400);
    H5Reader(index).read_stored(all, x.data(), y.data());
    // 8 fitted weights leave a residual of the noise variance (exactly 0 without noise).
    const double residual = least_squares_residual(x, y, 8);
    if (noise == 0.0) {
      EXPECT_LT(residual, 1e-9);
    } else {
      EXPECT_NEAR(residual, noise * noise * (400.0 - 8) / 400, 0.05);
    }
  }
}

}  // namespace
}  // namespace mnddp
