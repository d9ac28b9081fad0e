// The data side of the tasks: regression targets [N] and [N, k] (converted to float32, non-finite
// ones refused at the scan), token sequences in any integer dtype read as int64 ids and checked
// against the vocabulary, and data without a label dataset.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

using namespace mnddp;
using testing_support::TempDir;
using testing_support::usage_error_of;

namespace {

// x float32 [n, 2]: x[s] = {s, -s}; y float64 [n, k]: y[s][j] = s + j / 10 (or `bad` at sample 3, target 1).
void write_targets(const std::string& path, std::int64_t n, std::int64_t k, double bad = 0.0) {
  ShardLayout layout;
  layout.sample_shape = {2};
  layout.y_type = SampleType::F64;
  if (k > 1) layout.label_shape = {k};
  ShardWriter writer(path, n, layout);
  std::vector<float> x;
  std::vector<double> y;
  for (std::int64_t s = 0; s < n; ++s) {
    x.push_back(static_cast<float>(s));
    x.push_back(static_cast<float>(-s));
    for (std::int64_t j = 0; j < k; ++j) y.push_back(s == 3 && j == 1 && bad != 0.0 ? bad : s + j / 10.0);
  }
  writer.write(0, n, x.data(), y.data());
  writer.commit();
}

// Token ids as T (no y): sequence s holds (s * 5 + t) % vocab at position t, `bad` at [2][3] if set.
template <typename T>
void write_tokens(const std::string& path, SampleType type, std::int64_t n, std::int64_t length, std::int64_t vocab,
                  std::int64_t bad = -1) {
  ShardLayout layout;
  layout.x_type = type;
  layout.y_name = "";
  layout.sample_shape = {length};
  ShardWriter writer(path, n, layout);
  std::vector<T> x;
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t t = 0; t < length; ++t)
      x.push_back(static_cast<T>(s == 2 && t == 3 && bad >= 0 ? bad : (s * 5 + t) % vocab));
  writer.write(0, n, x.data(), nullptr);
  writer.commit();
}

TEST(RegressionData, TargetsOfKValuesAreReadAsFloat32InRequestOrder) {
  TempDir dir;
  write_targets(dir.file("a.h5"), 6, 3);
  const ShardIndex index = scan_shards({dir.file("a.h5")}, "x", "y", LabelKind::Value);
  EXPECT_EQ(index.label_type, SampleType::F64);
  EXPECT_EQ(index.label_shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(index.label_numel(), 3);
  EXPECT_FALSE(index.has_class_labels());
  // The index travels between ranks as text: the target shape must survive it.
  EXPECT_EQ(ShardIndex::deserialize(index.serialize()).label_shape, index.label_shape);

  H5Reader reader(index);
  const std::vector<std::int64_t> order = {4, 1};
  std::vector<float> x(4), y(6);
  reader.read_targets(order, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<float>{4, -4, 1, -1}));
  EXPECT_EQ(y, (std::vector<float>{4.0f, 4.1f, 4.2f, 1.0f, 1.1f, 1.2f}));
}

TEST(RegressionData, ANonFiniteTargetIsRefusedAtTheScanNamingFileSampleAndElement) {
  TempDir dir;
  write_targets(dir.file("nan.h5"), 6, 2, std::numeric_limits<double>::quiet_NaN());
  const auto message = usage_error_of([&] { scan_shards({dir.file("nan.h5")}, "x", "y", LabelKind::Value); });
  EXPECT_NE(message.find("nan.h5"), std::string::npos) << message;
  EXPECT_NE(message.find("sample 3 holds a non-finite target (nan at element 1)"), std::string::npos) << message;
  write_targets(dir.file("inf.h5"), 6, 1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(scan_shards({dir.file("inf.h5")}, "x", "y", LabelKind::Value).label_numel(), 1);  // k=1: no [3][1]
}

TEST(RegressionData, ClassificationStillRefusesTwoDimensionalLabels) {
  TempDir dir;
  write_targets(dir.file("a.h5"), 6, 2);
  const auto message = usage_error_of([&] { scan_shards({dir.file("a.h5")}, "x", "y"); });
  EXPECT_NE(message.find("must be a 1-D integer array of class labels"), std::string::npos) << message;
}

TEST(RegressionData, ShardsThatDisagreeOnTheTargetWidthAreNamed) {
  TempDir dir;
  write_targets(dir.file("a.h5"), 6, 2);
  write_targets(dir.file("b.h5"), 6, 3);
  const auto message = usage_error_of([&] {
    scan_shards({dir.file("a.h5"), dir.file("b.h5")}, "x", "y", LabelKind::Value);
  });
  EXPECT_NE(message.find("float64 labels [2]"), std::string::npos) << message;
  EXPECT_NE(message.find("float64 labels [3]"), std::string::npos) << message;
}

TEST(TokenData, EveryIntegerTypeIsReadAsInt64Ids) {
  TempDir dir;
  write_tokens<std::uint16_t>(dir.file("u16.h5"), SampleType::U16, 5, 9, 60000);
  write_tokens<std::uint32_t>(dir.file("u32.h5"), SampleType::U32, 5, 9, 60000);
  write_tokens<std::int64_t>(dir.file("i64.h5"), SampleType::I64, 5, 9, 60000);
  write_tokens<std::uint8_t>(dir.file("u8.h5"), SampleType::U8, 5, 9, 200);
  for (const char* name : {"u16.h5", "u32.h5", "i64.h5", "u8.h5"}) {
    const ShardIndex index = scan_shards({dir.file(name)}, "x", "y", LabelKind::None);
    EXPECT_FALSE(index.has_labels()) << name;
    EXPECT_EQ(index.label_numel(), 0) << name;
    H5Reader reader(index);
    std::vector<std::int64_t> ids(18);
    const std::vector<std::int64_t> order = {3, 3};  // a repeated sample is copied, not read twice
    reader.read_tokens(order, ids.data());
    for (std::int64_t t = 0; t < 9; ++t) {
      EXPECT_EQ(ids[static_cast<std::size_t>(t)], 15 + t) << name << " position " << t;
      EXPECT_EQ(ids[static_cast<std::size_t>(9 + t)], 15 + t) << name << " position " << t;
    }
  }
}

TEST(TokenData, AnIdOutsideTheVocabularyIsNamedWithFileSampleAndPosition) {
  TempDir dir;
  write_tokens<std::uint16_t>(dir.file("t.h5"), SampleType::U16, 5, 9, 50, /*bad=*/777);
  H5ReaderOptions options;
  options.vocab_size = 50;
  H5Reader reader(scan_shards({dir.file("t.h5")}, "x", "y", LabelKind::None), options);
  std::vector<std::int64_t> ids(9);
  const std::vector<std::int64_t> good = {1};
  reader.read_tokens(good, ids.data());
  const std::vector<std::int64_t> bad = {2};
  const auto message = usage_error_of([&] { reader.read_tokens(bad, ids.data()); });
  EXPECT_NE(message.find("t.h5"), std::string::npos) << message;
  EXPECT_NE(message.find("sample 2 holds token id 777 at position 3, outside [0, 50) set by --vocab-size 50"),
            std::string::npos)
      << message;
}

TEST(TokenData, TheInputRangeScanFindsTheLargestId) {
  TempDir dir;
  write_tokens<std::uint16_t>(dir.file("a.h5"), SampleType::U16, 5, 9, 50);
  write_tokens<std::uint16_t>(dir.file("b.h5"), SampleType::U16, 5, 9, 50, /*bad=*/4321);
  const auto [low, high] =
      scan_input_range(scan_shards({dir.file("a.h5"), dir.file("b.h5")}, "x", "y", LabelKind::None));
  EXPECT_EQ(low, 0);
  EXPECT_EQ(high, 4321);
}

TEST(TokenData, TheLoaderDeliversTokenBatchesWithoutTransforms) {
  TempDir dir;
  write_tokens<std::uint8_t>(dir.file("a.h5"), SampleType::U8, 6, 4, 100);
  H5Reader reader(scan_shards({dir.file("a.h5")}, "x", "y", LabelKind::None));
  LoaderOptions options;
  options.content = BatchContent::Tokens;  // uint8 ids must not be divided by 255
  Loader loader(reader, {5, 0, 2}, 2, options);
  auto first = loader.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(first->tokens, (std::vector<std::int64_t>{25, 26, 27, 28, 0, 1, 2, 3}));
  EXPECT_TRUE(first->x.empty());
  auto second = loader.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->tokens, (std::vector<std::int64_t>{10, 11, 12, 13}));
  EXPECT_FALSE(loader.next());
}

TEST(SynthData, TokenSequencesFollowTheirSuccessorTable) {
  TempDir dir;
  SynthOptions synth;
  synth.task = SynthTask::Lm;
  synth.out_dir = dir.file("lm");
  synth.shape = {33};
  synth.vocab = 40;
  synth.train_samples = 64;
  synth.val_samples = 16;
  synth.shards = 2;
  write_synthetic_dataset(synth);
  const ShardIndex index =
      scan_shards({dir.file("lm/train_000.h5"), dir.file("lm/train_001.h5")}, "x", "y", LabelKind::None);
  EXPECT_EQ(index.sample_type, SampleType::U16);
  EXPECT_EQ(index.sample_shape, (std::vector<std::int64_t>{33}));
  H5Reader reader(index);
  std::vector<std::int64_t> order(64);
  for (std::int64_t i = 0; i < 64; ++i) order[static_cast<std::size_t>(i)] = i;
  std::vector<std::int64_t> ids(64 * 33);
  reader.read_tokens(order, ids.data());
  // Each token has at most kSynthSuccessors distinct successors: a learnable structure.
  std::vector<std::vector<std::int64_t>> successors(40);
  for (std::size_t s = 0; s < 64; ++s)
    for (std::size_t t = 0; t + 1 < 33; ++t) {
      const auto from = ids[s * 33 + t], to = ids[s * 33 + t + 1];
      ASSERT_TRUE(from >= 0 && from < 40 && to >= 0 && to < 40);
      auto& seen = successors[static_cast<std::size_t>(from)];
      if (std::find(seen.begin(), seen.end(), to) == seen.end()) seen.push_back(to);
    }
  for (const auto& seen : successors) EXPECT_LE(seen.size(), static_cast<std::size_t>(kSynthSuccessors));
}

TEST(SynthData, RegressionWithSeveralTargetsWritesAMatrix) {
  TempDir dir;
  SynthOptions synth;
  synth.task = SynthTask::Regression;
  synth.out_dir = dir.file("reg");
  synth.shape = {8};
  synth.targets = 3;
  synth.train_samples = 10;
  synth.val_samples = 0;
  synth.shards = 1;
  write_synthetic_dataset(synth);
  const ShardIndex index = scan_shards({dir.file("reg/train_000.h5")}, "x", "y", LabelKind::Value);
  EXPECT_EQ(index.label_shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(index.label_type, SampleType::F32);
}

}  // namespace
