// H5Reader, scan_shards, expand_data_paths and Loader against small files written here with the
// raw HDF5 C API: every supported dtype (incl. big-endian and float16), chunked+gzip, duplicated
// and shuffled indices across shards, and each validation error naming its file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::TempDir;

// Expected failures below would otherwise print HDF5's own error stacks.
class SilenceHdf5 : public ::testing::Environment {
 public:
  void SetUp() override { h5_silence_default_errors(); }
};
const auto* const kSilenceHdf5 = ::testing::AddGlobalTestEnvironment(new SilenceHdf5);

// x[global sample s, element j]: exact in every tested dtype, and different per sample and element.
double value_of(std::int64_t s, std::int64_t j, bool is_signed, bool fractional) {
  const double v = static_cast<double>((s * 7 + j * 3) % 100) - (is_signed ? 50.0 : 0.0);
  return fractional ? v + 0.5 : v;
}

struct ShardSpec {
  hid_t x_type = H5T_IEEE_F32LE;
  std::vector<hsize_t> sample_shape = {2, 3};
  std::int64_t first = 0;  // global index of the shard's first sample (drives the values)
  std::int64_t count = 5;
  bool is_signed = true;
  bool fractional = true;
  bool gzip_chunks = false;
  hid_t y_type = H5T_STD_I64LE;
  std::int64_t y_count = -1;  // -1: same as count
  const char* x_name = "x";
  const char* y_name = "y";
};

void write_dataset(hid_t file, const char* name, hid_t type, const std::vector<hsize_t>& dims, hid_t memory_type,
                   const void* data, bool gzip_chunks) {
  H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
  if (gzip_chunks && dims[0] > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = 2;  // small chunks so one read spans several of them
    H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(props.get(), 4);
  }
  H5Handle dataset(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
  ASSERT_TRUE(dataset) << name;
  if (dims[0] > 0) {
    ASSERT_GE(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0) << name;
  }
}

void write_shard(const std::string& path, const ShardSpec& spec) {
  std::int64_t numel = 1;
  for (auto d : spec.sample_shape) numel *= static_cast<std::int64_t>(d);
  std::vector<double> x;
  for (std::int64_t s = spec.first; s < spec.first + spec.count; ++s)
    for (std::int64_t j = 0; j < numel; ++j) x.push_back(value_of(s, j, spec.is_signed, spec.fractional));
  const std::int64_t y_count = spec.y_count < 0 ? spec.count : spec.y_count;
  std::vector<std::int64_t> y;
  for (std::int64_t s = spec.first; s < spec.first + y_count; ++s) y.push_back(s * 10 + 1);

  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(file) << path;
  std::vector<hsize_t> x_dims{static_cast<hsize_t>(spec.count)};
  x_dims.insert(x_dims.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  write_dataset(file.get(), spec.x_name, spec.x_type, x_dims, H5T_NATIVE_DOUBLE, x.data(), spec.gzip_chunks);
  write_dataset(file.get(), spec.y_name, spec.y_type, {static_cast<hsize_t>(y_count)}, H5T_NATIVE_INT64, y.data(),
                false);
}

H5Handle copy_of(hid_t predefined) { return H5Handle(H5Tcopy(predefined)); }

// IEEE half as HDF5 1.10 can describe it (it has no predefined float16 type).
H5Handle float16_type() {
  H5Handle type = copy_of(H5T_IEEE_F32LE);
  H5Tset_fields(type.get(), 15, 10, 5, 0, 10);
  H5Tset_size(type.get(), 2);
  H5Tset_ebias(type.get(), 15);
  return type;
}

struct DtypeCase {
  const char* name;
  std::function<H5Handle()> type;
  SampleType expected;
  bool is_signed;
  bool fractional;
  bool gzip_chunks = false;
};

class ReaderDtypes : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(ReaderDtypes, ReadsShuffledAndDuplicatedIndicesAcrossShardsExactly) {
  const DtypeCase& c = GetParam();
  TempDir dir("mnddp-reader");
  const std::int64_t sizes[] = {5, 7, 4};
  std::vector<std::string> paths;
  std::int64_t first = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    paths.push_back(dir.file("shard_" + std::to_string(s) + ".h5"));
    const H5Handle x_type = c.type();
    ShardSpec spec;
    spec.x_type = x_type.get();
    spec.first = first;
    spec.count = sizes[s];
    spec.is_signed = c.is_signed;
    spec.fractional = c.fractional;
    spec.gzip_chunks = c.gzip_chunks;
    spec.y_type = s == 1 ? H5T_STD_I32BE : H5T_STD_I64LE;  // labels are converted too
    write_shard(paths.back(), spec);
    first += sizes[s];
  }
  const ShardIndex index = scan_shards(paths, "x", "y");
  EXPECT_EQ(index.sample_type, c.expected) << sample_type_name(index.sample_type);
  EXPECT_EQ(index.num_samples(), 16);
  EXPECT_EQ(index.sample_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(index.locate(12), (std::pair<std::size_t, std::int64_t>{2, 0}));

  H5Reader reader(index);
  // Out of order, crossing shards, with runs (4,5,6) and duplicates (6 three times, 0 twice).
  const std::vector<std::int64_t> wanted = {6, 15, 0, 4, 5, 6, 11, 12, 6, 0, 3, 13};
  std::vector<float> x(wanted.size() * 6);
  std::vector<std::int64_t> y(wanted.size());
  reader.read(wanted, x.data(), y.data());
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    EXPECT_EQ(y[i], wanted[i] * 10 + 1) << "label of sample " << wanted[i];
    for (std::int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(x[i * 6 + j], static_cast<float>(value_of(wanted[i], j, c.is_signed, c.fractional)))
          << c.name << " sample " << wanted[i] << " element " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, ReaderDtypes,
    ::testing::Values(DtypeCase{"uint8", [] { return copy_of(H5T_STD_U8LE); }, SampleType::U8, false, false},
                      DtypeCase{"int8", [] { return copy_of(H5T_STD_I8LE); }, SampleType::I8, true, false},
                      DtypeCase{"int16", [] { return copy_of(H5T_STD_I16LE); }, SampleType::I16, true, false},
                      DtypeCase{"int32", [] { return copy_of(H5T_STD_I32LE); }, SampleType::I32, true, false},
                      DtypeCase{"int64", [] { return copy_of(H5T_STD_I64LE); }, SampleType::I64, true, false},
                      DtypeCase{"float32", [] { return copy_of(H5T_IEEE_F32LE); }, SampleType::F32, true, true},
                      DtypeCase{"float64", [] { return copy_of(H5T_IEEE_F64LE); }, SampleType::F64, true, true},
                      DtypeCase{"float32be", [] { return copy_of(H5T_IEEE_F32BE); }, SampleType::F32, true, true},
                      DtypeCase{"float32gzip", [] { return copy_of(H5T_IEEE_F32LE); }, SampleType::F32, true, true,
                                true},
                      DtypeCase{"uint8gzip", [] { return copy_of(H5T_STD_U8LE); }, SampleType::U8, false, false, true},
                      DtypeCase{"float16", float16_type, SampleType::F16, true, true}),
    [](const auto& test) { return std::string(test.param.name); });

TEST(Reader, ManyRunsInOneShardAndOutOfRangeIndices) {
  // Hundreds of separate runs take the pairwise-merged selection path, not just the direct OR.
  TempDir dir("mnddp-reader");
  ShardSpec spec;
  spec.count = 1000;
  spec.gzip_chunks = true;
  write_shard(dir.file("many.h5"), spec);
  H5Reader reader(scan_shards({dir.file("many.h5")}, "x", "y"));
  std::vector<std::int64_t> wanted;
  for (std::int64_t i = 998; i >= 0; i -= 3) wanted.push_back(i);
  wanted.insert(wanted.end(), {500, 501, 502, 999, 0, 500});
  std::vector<float> x(wanted.size() * 6);
  std::vector<std::int64_t> y(wanted.size());
  reader.read(wanted, x.data(), y.data());
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    ASSERT_EQ(y[i], wanted[i] * 10 + 1) << "position " << i;
    for (std::int64_t j = 0; j < 6; ++j)
      ASSERT_EQ(x[i * 6 + j], static_cast<float>(value_of(wanted[i], j, true, true)));
  }
  const std::int64_t past_end = 1000;
  EXPECT_THROW(reader.read({&past_end, 1}, x.data(), y.data()), Error);
}

// --- scan_shards validation: each error is a UsageError naming the offending file ---------------

std::string scan_error(const std::vector<std::string>& paths, const char* y_name = "y") {
  try {
    scan_shards(paths, "x", y_name);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "scan_shards accepted bad input";
  return {};
}

TEST(ScanShards, MissingFileNamesTheFile) {
  TempDir dir("mnddp-scan");
  const auto message = scan_error({dir.file("absent.h5")});
  EXPECT_NE(message.find("cannot open HDF5 file '" + dir.file("absent.h5") + "'"), std::string::npos) << message;
}

TEST(ScanShards, NonHdf5FileNamesTheFile) {
  TempDir dir("mnddp-scan");
  std::ofstream(dir.file("text.h5")) << "not hdf5\n";
  const auto message = scan_error({dir.file("text.h5")});
  EXPECT_NE(message.find("cannot open HDF5 file '" + dir.file("text.h5") + "'"), std::string::npos) << message;
}

TEST(ScanShards, MissingDatasetNamesFileDatasetAndOption) {
  TempDir dir("mnddp-scan");
  write_shard(dir.file("a.h5"), {});
  for (const char* y_name : {"labels", "group/labels"}) {
    const auto message = scan_error({dir.file("a.h5")}, y_name);
    EXPECT_NE(message.find(dir.file("a.h5")), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("dataset '") + y_name + "' not found"), std::string::npos) << message;
    EXPECT_NE(message.find("--y-name"), std::string::npos) << message;
  }
}

TEST(ScanShards, SampleShapeMismatchNamesBothFilesAndShapes) {
  TempDir dir("mnddp-scan");
  write_shard(dir.file("a.h5"), {});
  ShardSpec other;
  other.sample_shape = {3, 2};
  write_shard(dir.file("b.h5"), other);
  const auto message = scan_error({dir.file("a.h5"), dir.file("b.h5")});
  EXPECT_NE(message.find(dir.file("a.h5")), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("b.h5")), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 2]"), std::string::npos) << message;
}

TEST(ScanShards, DtypeMismatchAcrossShardsIsAnError) {
  TempDir dir("mnddp-scan");
  write_shard(dir.file("a.h5"), {});
  ShardSpec other;
  other.x_type = H5T_IEEE_F64LE;
  write_shard(dir.file("b.h5"), other);
  const auto message = scan_error({dir.file("a.h5"), dir.file("b.h5")});
  EXPECT_NE(message.find("float64"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("b.h5")), std::string::npos) << message;
}

TEST(ScanShards, LabelCountMismatchNamesTheFile) {
  TempDir dir("mnddp-scan");
  ShardSpec spec;
  spec.y_count = 4;
  write_shard(dir.file("short_y.h5"), spec);
  const auto message = scan_error({dir.file("short_y.h5")});
  EXPECT_NE(message.find(dir.file("short_y.h5")), std::string::npos) << message;
  EXPECT_NE(message.find("4 labels"), std::string::npos) << message;
}

TEST(ScanShards, NonIntegerLabelsAndRankOneInputsAreErrors) {
  TempDir dir("mnddp-scan");
  ShardSpec float_labels;
  float_labels.y_type = H5T_IEEE_F32LE;
  write_shard(dir.file("float_y.h5"), float_labels);
  auto message = scan_error({dir.file("float_y.h5")});
  EXPECT_NE(message.find("integer"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("float_y.h5")), std::string::npos) << message;

  ShardSpec flat;
  flat.sample_shape = {};
  write_shard(dir.file("flat.h5"), flat);
  message = scan_error({dir.file("flat.h5")});
  EXPECT_NE(message.find("at least 2 dimensions"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("flat.h5")), std::string::npos) << message;
}

TEST(ScanShards, EmptyShardNamesTheFile) {
  TempDir dir("mnddp-scan");
  write_shard(dir.file("a.h5"), {});
  ShardSpec empty;
  empty.count = 0;
  write_shard(dir.file("empty.h5"), empty);
  const auto message = scan_error({dir.file("a.h5"), dir.file("empty.h5")});
  EXPECT_NE(message.find(dir.file("empty.h5")), std::string::npos) << message;
  EXPECT_NE(message.find("0 samples"), std::string::npos) << message;
}

TEST(ScanShards, TruncatedFileIsAUsageErrorNamingTheFile) {
  TempDir dir("mnddp-scan");
  ShardSpec big;
  big.count = 2000;
  write_shard(dir.file("cut.h5"), big);
  const auto index = scan_shards({dir.file("cut.h5")}, "x", "y");
  std::filesystem::resize_file(dir.file("cut.h5"), std::filesystem::file_size(dir.file("cut.h5")) / 2);
  H5Reader reader(index);
  std::vector<float> x(6);
  std::int64_t y = 0;
  const std::int64_t last = 1999;
  try {
    reader.read({&last, 1}, x.data(), &y);
    ADD_FAILURE() << "read from a truncated file succeeded";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("cut.h5")), std::string::npos) << e.what();
  }
}

TEST(ShardIndex, SerializeRoundTrips) {
  ShardIndex index;
  index.shards = {{"/data/a b.h5", 10}, {"/data/\"quoted\".h5", 3}};
  index.sample_shape = {3, 32, 32};
  index.sample_type = SampleType::U8;
  index.x_name = "images";
  index.y_name = "labels";
  const ShardIndex copy = ShardIndex::deserialize(index.serialize());
  EXPECT_EQ(copy.shards.size(), 2u);
  EXPECT_EQ(copy.shards[1].path, "/data/\"quoted\".h5");
  EXPECT_EQ(copy.shards[0].num_samples, 10);
  EXPECT_EQ(copy.sample_shape, index.sample_shape);
  EXPECT_EQ(copy.sample_type, SampleType::U8);
  EXPECT_EQ(copy.x_name, "images");
  EXPECT_EQ(copy.y_name, "labels");
  EXPECT_EQ(copy.num_samples(), 13);
  EXPECT_EQ(copy.sample_numel(), 3 * 32 * 32);
  EXPECT_THROW(ShardIndex::deserialize("{not json"), Error);
}

// --- expand_data_paths -------------------------------------------------------------------------

TEST(ExpandDataPaths, DirectoriesGlobsListsAndCommaMixes) {
  TempDir dir("mnddp-expand");
  std::filesystem::create_directories(dir.path() / "d" / "sub");
  for (const char* name : {"d/b.h5", "d/a.hdf5", "d/notes.txt", "d/sub/c.h5", "e.h5", "f.h5"})
    std::ofstream(dir.file(name)) << "";
  const std::string d = dir.file("d");
  EXPECT_EQ(expand_data_paths(d, "--train-data"), (std::vector<std::string>{d + "/a.hdf5", d + "/b.h5"}));
  EXPECT_EQ(expand_data_paths(d + "/*.h5", "--train-data"), (std::vector<std::string>{d + "/b.h5"}));
  std::ofstream(dir.file("d/files.list")) << "# training shards\nsub/c.h5\n\n  " << dir.file("e.h5") << "  # abs\n";
  EXPECT_EQ(expand_data_paths(dir.file("d/files.list"), "--train-data"),
            (std::vector<std::string>{d + "/sub/c.h5", dir.file("e.h5")}));
  EXPECT_EQ(expand_data_paths(dir.file("f.h5") + ", " + dir.file("e.h5"), "--train-data"),
            (std::vector<std::string>{dir.file("e.h5"), dir.file("f.h5")}));
}

TEST(ExpandDataPaths, ErrorsNameTheOptionAndTheValue) {
  TempDir dir("mnddp-expand");
  std::ofstream(dir.file("a.h5")) << "";
  const auto expect_error = [](const std::string& spec, const std::string& expected) {
    try {
      expand_data_paths(spec, "--train-data");
      ADD_FAILURE() << "accepted " << spec;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("--train-data", 0), 0u) << e.what();
    }
  };
  expect_error(dir.file("*.hdf5"), "no HDF5 files match '" + dir.file("*.hdf5") + "'");
  expect_error(dir.file("missing.h5"), "file not found: '" + dir.file("missing.h5") + "'");
  expect_error(dir.file("a.h5") + "," + dir.path().string(), "more than once");
  expect_error(" , ", "no data files");
}

// --- Loader ------------------------------------------------------------------------------------

ShardIndex two_shards(const TempDir& dir) {
  ShardSpec first;
  first.count = 7;
  write_shard(dir.file("l0.h5"), first);
  ShardSpec second;
  second.first = 7;
  second.count = 6;
  write_shard(dir.file("l1.h5"), second);
  return scan_shards({dir.file("l0.h5"), dir.file("l1.h5")}, "x", "y");
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

}  // namespace
}  // namespace mnddp
