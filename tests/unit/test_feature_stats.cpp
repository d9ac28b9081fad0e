// Feature statistics (stable blockwise mean/std against a direct two-pass computation, the stats
// file round trip and its validation) and ShardWriter (complete shards only, nothing overwritten).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "h5_fixtures.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/data/transforms.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::ShardSpec;
using testing_support::TempDir;
using testing_support::usage_error_of;
using testing_support::value_of;
using testing_support::write_shard;

// Two shards whose values sit on a large offset, where a naive sum-of-squares loses every digit.
ShardIndex offset_shards(const TempDir& dir) {
  ShardSpec a;
  a.count = 37;
  a.x_type = H5T_IEEE_F64LE;
  ShardSpec b = a;
  b.first = 37;
  b.count = 26;
  return testing_support::two_shards(dir, a, b);
}

TEST(FeatureStats, BlockwiseMomentsMatchADirectTwoPassComputation) {
  TempDir dir("mnddp-stats");
  const ShardIndex index = offset_shards(dir);
  for (const std::int64_t block : {1, 5, 64}) {
    H5Reader reader(index);
    const FeatureStats stats = compute_feature_stats(reader, block);
    ASSERT_EQ(stats.num_features(), 6);
    EXPECT_EQ(stats.count, 63);
    EXPECT_EQ(stats.sample_shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(stats.files.size(), 2u);
    for (std::int64_t j = 0; j < 6; ++j) {
      double mean = 0;
      for (std::int64_t s = 0; s < 63; ++s) mean += value_of(s, j, true, true);
      mean /= 63;
      double squares = 0;
      for (std::int64_t s = 0; s < 63; ++s) squares += std::pow(value_of(s, j, true, true) - mean, 2);
      const auto f = static_cast<std::size_t>(j);
      EXPECT_NEAR(stats.mean[f], mean, 1e-12) << "block " << block;
      EXPECT_NEAR(stats.stddev[f], std::sqrt(squares / 63), 1e-12) << "block " << block;
    }
  }
}

TEST(FeatureStats, LargeOffsetsKeepTheirDigits) {
  // 1e7 + {0, 1, 2, 3} repeated (exact in float32, which the reader converts to): a float32
  // sum of squares would return garbage; the blockwise double update keeps std = sqrt(1.25).
  TempDir dir("mnddp-stats");
  ShardLayout layout;
  layout.x_type = SampleType::F64;
  layout.sample_shape = {1};
  {
    ShardWriter writer(dir.file("offset.h5"), 4000, layout);
    std::vector<double> x(4000);
    std::vector<std::int64_t> y(4000, 0);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1e7 + static_cast<double>(i % 4);
    writer.write(0, 4000, x.data(), y.data());
    writer.commit();
  }
  H5Reader reader(scan_shards({dir.file("offset.h5")}, "x", "y"));
  const FeatureStats stats = compute_feature_stats(reader, 333);
  EXPECT_DOUBLE_EQ(stats.mean[0], 1e7 + 1.5);
  EXPECT_NEAR(stats.stddev[0], std::sqrt(1.25), 1e-9);
}

TEST(FeatureStats, SaveLoadRoundTripsAndRefusesToOverwrite) {
  TempDir dir("mnddp-stats");
  H5Reader reader(offset_shards(dir));
  const FeatureStats stats = compute_feature_stats(reader);
  save_feature_stats(stats, dir.file("stats.json"), false);
  const FeatureStats loaded = load_feature_stats(dir.file("stats.json"), 6);
  EXPECT_EQ(loaded.path, dir.file("stats.json"));
  EXPECT_EQ(loaded.mean, stats.mean);  // JSON keeps doubles to the last bit
  EXPECT_EQ(loaded.stddev, stats.stddev);
  EXPECT_EQ(loaded.sample_type, "float64");
  auto message = usage_error_of([&] { save_feature_stats(stats, dir.file("stats.json"), false); });
  EXPECT_NE(message.find("--overwrite"), std::string::npos) << message;
  EXPECT_NO_THROW(save_feature_stats(stats, dir.file("stats.json"), true));
  EXPECT_FALSE(std::filesystem::exists(dir.file("stats.json.partial")));
}

TEST(FeatureStats, LoadNamesTheFileForEveryProblem) {
  TempDir dir("mnddp-stats");
  const std::string path = dir.file("s.json");
  const auto write_text = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  const auto load_error = [&](const std::string& text, std::int64_t numel) {
    write_text(text);
    return usage_error_of([&] { load_feature_stats(path, numel); });
  };
  const std::string good =
      R"({"format": "mnddp-feature-stats-1", "sample_shape": [2], "sample_type": "uint8", "count": 3,
          "files": ["a.h5"], "mean": [1.0, 2.0], "std": [0.5, 0.0]})";
  write_text(good);
  EXPECT_EQ(load_feature_stats(path, 2).stddev[1], 0.0);
  auto message = load_error(good, 3);
  EXPECT_NE(message.find("feature stats file '" + path + "': 2 features, but the data's samples have 3"),
            std::string::npos)
      << message;
  message = load_error("{not json", 2);
  EXPECT_NE(message.find("'" + path + "': not a stats file"), std::string::npos) << message;
  message = load_error(R"({"format": "mnddp-feature-stats-1", "sample_shape": [2], "sample_type": "uint8",
                           "count": 3, "files": [], "mean": [1.0, 2.0], "std": [0.5, -1.0]})",
                       2);
  EXPECT_NE(message.find("feature 1 has mean 2 and std -1"), std::string::npos) << message;
  std::filesystem::remove(path);
  message = usage_error_of([&] { load_feature_stats(path, 2); });
  EXPECT_NE(message.find("'" + path + "': cannot be read"), std::string::npos) << message;
}

TEST(Transforms, ScaleOnlyUint8AndFloorTheStd) {
  ShardIndex u8;
  u8.sample_shape = {2};
  u8.sample_type = SampleType::U8;
  ShardIndex f32 = u8;
  f32.sample_type = SampleType::F32;
  std::vector<float> x = {255, 51, 0, 102};
  BatchTransform(TransformOptions{}, u8).apply(x.data(), 2);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.2f, 0.0f, 0.4f}));
  EXPECT_TRUE(BatchTransform(TransformOptions{}, f32).is_identity());
  EXPECT_EQ(BatchTransform(TransformOptions{}, f32).describe(), "none");

  TransformOptions normalise;
  normalise.feature_stats = FeatureStats{};
  normalise.feature_stats->mean = {10, -1};
  normalise.feature_stats->stddev = {4, 1e-9};
  x = {14, -1, 2, 0};
  BatchTransform(normalise, u8).apply(x.data(), 2);  // stats replace the uint8 scaling
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.0f, -2.0f, 1e6f}));
}

// --- ShardWriter -------------------------------------------------------------------------------

TEST(ShardWriter, OnlyACommittedShardAppearsAndOutputsAreNotOverwritten) {
  TempDir dir("mnddp-writer");
  ShardLayout layout;
  layout.x_type = SampleType::U8;
  layout.sample_shape = {3};
  layout.gzip_level = 6;
  const std::vector<unsigned char> x = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int64_t> y = {7, 8};
  {
    ShardWriter abandoned(dir.file("a.h5"), 2, layout);
    abandoned.write(0, 1, x.data(), y.data());
    EXPECT_TRUE(std::filesystem::exists(dir.file("a.h5.partial")));
    EXPECT_THROW(abandoned.commit(), Error);  // one of two rows written
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.h5.partial")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.h5")));

  ShardWriter writer(dir.file("a.h5"), 2, layout);
  writer.write(0, 2, x.data(), y.data());
  writer.write_attribute("num_classes", std::int64_t{9});
  writer.commit();
  const ShardIndex index = scan_shards({dir.file("a.h5")}, "x", "y");
  EXPECT_EQ(index.sample_type, SampleType::U8);
  EXPECT_EQ(index.shards[0].label_min, 7);
  EXPECT_EQ(index.shards[0].label_max, 8);

  const auto message = usage_error_of([&] { require_new_outputs({dir.file("b.h5"), dir.file("a.h5")}, false); });
  EXPECT_EQ(message, "'" + dir.file("a.h5") + "' already exists; pass --overwrite to replace it");
  EXPECT_NO_THROW(require_new_outputs({dir.file("a.h5")}, true));
}

}  // namespace
}  // namespace mnddp
