// Bad data and the checks that catch it: label ranges recorded by the scan, the non-finite input
// policies, corrupt and wrongly shaped files, and read_stored's untouched copies.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "h5_fixtures.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::copy_of;
using testing_support::float16_type;
using testing_support::ShardSpec;
using testing_support::TempDir;
using testing_support::usage_error_of;
using testing_support::value_of;
using testing_support::write_shard;

// --- label ranges ------------------------------------------------------------------------------

TEST(LabelRange, ScanRecordsEachShardsRangeAndTheCheckNamesTheFirstBadFile) {
  TempDir dir("mnddp-labels");
  ShardSpec a;
  a.count = 20;
  a.label_of = [](std::int64_t s) { return s % 4; };  // 0..3
  write_shard(dir.file("a.h5"), a);
  ShardSpec b;
  b.first = 20;
  b.count = 9;
  b.y_type = H5T_STD_U8LE;                                   // any integer width becomes int64
  b.label_of = [](std::int64_t s) { return (s - 20) + 2; };  // 2..10
  write_shard(dir.file("b.h5"), b);
  const ShardIndex index = scan_shards({dir.file("a.h5"), dir.file("b.h5")}, "x", "y");
  EXPECT_EQ(index.shards[0].label_min, 0);
  EXPECT_EQ(index.shards[0].label_max, 3);
  EXPECT_EQ(index.shards[1].label_min, 2);
  EXPECT_EQ(index.shards[1].label_max, 10);
  // The ranges travel with the broadcast index.
  EXPECT_EQ(ShardIndex::deserialize(index.serialize()).shards[1].label_max, 10);

  EXPECT_NO_THROW(check_label_range(index, 11, "--num-classes"));
  const auto message = usage_error_of([&] { check_label_range(index, 10, "--num-classes"); });
  EXPECT_NE(message.find("'" + dir.file("b.h5") +
                         "': dataset 'y' has label 10, outside [0, 10) set by "
                         "--num-classes 10"),
            std::string::npos)
      << message;
}

TEST(LabelRange, NegativeLabelsAndFloatLabelsAreRefused) {
  TempDir dir("mnddp-labels");
  ShardSpec negative;
  negative.label_of = [](std::int64_t s) { return s - 2; };  // -2..2
  write_shard(dir.file("neg.h5"), negative);
  const auto message =
      usage_error_of([&] { check_label_range(scan_shards({dir.file("neg.h5")}, "x", "y"), 5, "--num-classes"); });
  EXPECT_NE(message.find("has label -2"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("neg.h5")), std::string::npos) << message;

  ShardSpec targets;
  targets.y_type = H5T_IEEE_F32LE;
  write_shard(dir.file("float.h5"), targets);
  const ShardIndex index = scan_shards({dir.file("float.h5")}, "x", "y", LabelKind::Value);
  EXPECT_EQ(index.label_type, SampleType::F32);
  const auto float_message = usage_error_of([&] { check_label_range(index, 5, "--num-classes"); });
  EXPECT_NE(float_message.find("must be a 1-D integer array of class labels in [0, 5) set by --num-classes, found "
                               "float32 labels per sample"),
            std::string::npos)
      << float_message;
}

TEST(LabelRange, ShardsMustAgreeOnTheLabelType) {
  TempDir dir("mnddp-labels");
  write_shard(dir.file("a.h5"), {});
  ShardSpec targets;
  targets.y_type = H5T_IEEE_F64LE;
  write_shard(dir.file("b.h5"), targets);
  const auto message = usage_error_of([&] {
    scan_shards({dir.file("a.h5"), dir.file("b.h5")}, "x", "y", LabelKind::Value);
  });
  EXPECT_NE(message.find("integer labels but '" + dir.file("b.h5") + "' has float64"), std::string::npos) << message;
}

// --- non-finite inputs -------------------------------------------------------------------------

// Collects spdlog messages while alive.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)), previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> lines() const { return sink_->last_formatted(); }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

ShardIndex nonfinite_shards(const TempDir& dir, double value) {
  ShardSpec a;
  a.count = 6;
  a.nonfinite_sample = 2;
  a.nonfinite_value = value;
  a.x_type = H5T_IEEE_F64BE;  // the check happens after conversion, whatever the stored float type
  ShardSpec b;
  b.first = 6;
  b.count = 6;
  b.nonfinite_sample = 9;
  b.nonfinite_value = value;
  b.x_type = H5T_IEEE_F64BE;
  return testing_support::two_shards(dir, a, b);
}

TEST(NonFinite, ErrorPolicyNamesFileDatasetSampleAndOption) {
  TempDir dir("mnddp-nan");
  H5Reader reader(nonfinite_shards(dir, std::numeric_limits<double>::infinity()));
  std::vector<float> x(2 * 6);
  std::vector<std::int64_t> y(2);
  const std::vector<std::int64_t> clean = {0, 11};
  EXPECT_NO_THROW(reader.read(clean, x.data(), y.data()));
  const std::vector<std::int64_t> bad = {0, 9};
  const auto message = usage_error_of([&] { reader.read(bad, x.data(), y.data()); });
  EXPECT_NE(
      message.find("'" + dir.file("b.h5") + "': dataset 'x' sample 3 holds a non-finite input (inf at element 1)"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("--nonfinite-inputs"), std::string::npos) << message;
}

TEST(NonFinite, WarnPolicyPassesValuesAndWarnsOncePerFile) {
  TempDir dir("mnddp-nan");
  const ShardIndex index = nonfinite_shards(dir, std::nan(""));
  CapturedLog log;
  H5Reader reader(index, H5ReaderOptions{NonfinitePolicy::Warn});
  std::vector<float> x(3 * 6);
  std::vector<std::int64_t> y(3);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const std::vector<std::int64_t> wanted = {2, 9, 2};
    reader.read(wanted, x.data(), y.data());
    EXPECT_TRUE(std::isnan(x[1]));
    EXPECT_EQ(x[0], static_cast<float>(value_of(2, 0, true, true)));
  }
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 2u) << "one warning per file, not per sample or read";
  EXPECT_NE(lines[0].find(dir.file("a.h5")), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("sample 2 holds a non-finite input (nan"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(dir.file("b.h5")), std::string::npos) << lines[1];
}

TEST(NonFinite, IgnorePolicyIsSilentAndIntegerInputsAreNeverChecked) {
  TempDir dir("mnddp-nan");
  CapturedLog log;
  H5Reader reader(nonfinite_shards(dir, std::nan("")), H5ReaderOptions{NonfinitePolicy::Ignore});
  std::vector<float> x(6);
  const std::int64_t bad = 2;
  reader.read({&bad, 1}, x.data(), nullptr);  // labels may be skipped
  EXPECT_TRUE(std::isnan(x[1]));
  EXPECT_TRUE(log.lines().empty());
  EXPECT_THROW(parse_choice_or_throw<NonfinitePolicy>("skip", "--nonfinite-inputs"), UsageError);
  EXPECT_EQ(parse_choice_or_throw<NonfinitePolicy>("warn", "--nonfinite-inputs"), NonfinitePolicy::Warn);
}

// --- corrupt and wrongly shaped files ------------------------------------------------------------

// Overwrites `count` bytes of `path` at `offset` with a pattern.
void scribble(const std::string& path, std::uint64_t offset, std::size_t count) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(offset));
  const std::string junk(count, '\xAB');
  file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

TEST(CorruptFiles, BadSignatureAndBadCompressedChunkNameTheFile) {
  TempDir dir("mnddp-corrupt");
  ShardSpec spec;
  spec.count = 40;
  spec.gzip_chunks = true;
  write_shard(dir.file("sig.h5"), spec);
  scribble(dir.file("sig.h5"), 0, 8);
  auto message = usage_error_of([&] { scan_shards({dir.file("sig.h5")}, "x", "y"); });
  EXPECT_NE(message.find("cannot open HDF5 file '" + dir.file("sig.h5") + "'"), std::string::npos) << message;

  // A damaged gzip chunk of x: the scan (metadata and labels) passes, the read fails cleanly.
  write_shard(dir.file("chunk.h5"), spec);
  haddr_t address = 0;
  {
    H5Handle file = h5_open_read_only(dir.file("chunk.h5"));
    H5Handle x(H5Dopen2(file.get(), "x", H5P_DEFAULT));
    hsize_t offset[3] = {};
    unsigned mask = 0;
    hsize_t size = 0;
    H5Handle space(H5Dget_space(x.get()));
    ASSERT_GE(H5Dget_chunk_info(x.get(), space.get(), 5, offset, &mask, &address, &size), 0);
  }
  scribble(dir.file("chunk.h5"), address, 16);
  H5Reader reader(scan_shards({dir.file("chunk.h5")}, "x", "y"));
  std::vector<std::int64_t> all(40);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> x(40 * 6);
  message = usage_error_of([&] { reader.read(all, x.data(), nullptr); });
  // Decoded by mnddp (gzip chunks), which names the file, the dataset and the chunk.
  EXPECT_NE(message.find("'" + dir.file("chunk.h5") + "': dataset 'x' chunk 5 does not inflate"), std::string::npos)
      << message;
}

TEST(CorruptFiles, TwoDimensionalLabelsAreTheWrongRank) {
  TempDir dir("mnddp-corrupt");
  write_shard(dir.file("a.h5"), {});
  {
    H5Handle file(H5Fopen(dir.file("a.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    const hsize_t dims[2] = {5, 2};
    H5Handle space(H5Screate_simple(2, dims, nullptr));
    H5Handle labels(H5Dcreate2(file.get(), "y2", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(labels);
  }
  const auto message = usage_error_of([&] { scan_shards({dir.file("a.h5")}, "x", "y2"); });
  EXPECT_NE(message.find("'" + dir.file("a.h5") + "': dataset 'y2' must be a 1-D integer array"), std::string::npos)
      << message;
  EXPECT_NE(message.find("[5, 2]"), std::string::npos) << message;
}

// --- read_stored -------------------------------------------------------------------------------

// IEEE half bits -> float, by hand (independent of HDF5's conversion).
float half_to_float(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const double mantissa = bits & 0x3ff;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return static_cast<float>((bits & 0x8000) ? -magnitude : magnitude);
}

TEST(ReadStored, CopiesElementsInTheirOwnTypeAndNativeOrder) {
  TempDir dir("mnddp-stored");
  struct Case {
    const char* name;
    H5Handle type;
    bool is_signed;
    bool fractional;
  };
  Case cases[] = {{"uint8", copy_of(H5T_STD_U8LE), false, false},
                  {"int16be", copy_of(H5T_STD_I16BE), true, false},
                  {"float16", float16_type(), true, true},
                  {"float64be", copy_of(H5T_IEEE_F64BE), true, true}};
  for (const auto& c : cases) {
    ShardSpec spec;
    spec.x_type = c.type.get();
    spec.is_signed = c.is_signed;
    spec.fractional = c.fractional;
    const std::string path = dir.file(std::string(c.name) + ".h5");
    write_shard(path, spec);
    const ShardIndex index = scan_shards({path}, "x", "y");
    H5Reader reader(index);
    const std::vector<std::int64_t> wanted = {4, 1};
    std::vector<unsigned char> x(2 * 6 * sample_type_size(index.sample_type));
    std::vector<std::int64_t> y(2);
    reader.read_stored(wanted, x.data(), y.data());
    EXPECT_EQ(y, (std::vector<std::int64_t>{41, 11})) << c.name;
    for (std::size_t i = 0; i < 12; ++i) {
      const double expected = value_of(wanted[i / 6], static_cast<std::int64_t>(i % 6), c.is_signed, c.fractional);
      double got = 0;
      if (index.sample_type == SampleType::U8) got = x[i];
      if (index.sample_type == SampleType::I16) got = reinterpret_cast<const std::int16_t*>(x.data())[i];
      if (index.sample_type == SampleType::F16)
        got = half_to_float(reinterpret_cast<const std::uint16_t*>(x.data())[i]);
      if (index.sample_type == SampleType::F64) got = reinterpret_cast<const double*>(x.data())[i];
      EXPECT_EQ(got, expected) << c.name << " element " << i;
    }
  }
}

}  // namespace
}  // namespace mnddp
