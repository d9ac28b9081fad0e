// H5Reader, scan_shards and expand_data_paths against small files written with the raw HDF5 C API:
// every supported dtype (incl. big-endian and float16), chunked+gzip, unfiltered chunks (read
// directly) with unwritten ones, duplicated and shuffled indices across shards, and each validation
// error naming its file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
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
using testing_support::value_of;
using testing_support::write_shard;

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
  // Hundreds of separate runs through HDF5 (gzip chunks: no direct reads), one H5Dread each.
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

// Ten rows of 2x3 float32 in chunks of `chunk` (unfiltered), with chunk 2 (rows 6-8) never written.
void write_sparse_chunks(const std::string& path, const std::vector<hsize_t>& chunk) {
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  const std::vector<hsize_t> dims = {10, 2, 3};
  H5Handle space(H5Screate_simple(3, dims.data(), nullptr));
  H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(props.get(), 3, chunk.data());
  H5Handle x(H5Dcreate2(file.get(), "x", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
  for (const auto& [first, count] : {std::pair<hsize_t, hsize_t>{0, 6}, {9, 1}}) {
    std::vector<double> values;
    for (hsize_t s = first; s < first + count; ++s)
      for (std::int64_t j = 0; j < 6; ++j) values.push_back(value_of(static_cast<std::int64_t>(s), j, true, true));
    const hsize_t start[] = {first, 0, 0};
    const hsize_t counts[] = {count, 2, 3};
    H5Handle selection(H5Scopy(space.get()));
    H5Sselect_hyperslab(selection.get(), H5S_SELECT_SET, start, nullptr, counts, nullptr);
    H5Handle memory(H5Screate_simple(3, counts, nullptr));
    ASSERT_GE(H5Dwrite(x.get(), H5T_NATIVE_DOUBLE, memory.get(), selection.get(), H5P_DEFAULT, values.data()), 0);
  }
  std::vector<std::int64_t> labels(10);
  for (std::int64_t s = 0; s < 10; ++s) labels[static_cast<std::size_t>(s)] = s * 10 + 1;
  const hsize_t y_dims[] = {10};
  H5Handle y_space(H5Screate_simple(1, y_dims, nullptr));
  H5Handle y(H5Dcreate2(file.get(), "y", H5T_STD_I64LE, y_space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Dwrite(y.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()), 0);
}

TEST(Reader, UnfilteredChunksInAnyOrderAndUnwrittenChunksAsFillValues) {
  // Chunks of whole rows are read with preadv; chunks that split a row, and any read touching an
  // unwritten chunk, go through HDF5. Every way gives the same values.
  for (const auto& chunk : {std::vector<hsize_t>{3, 2, 3}, std::vector<hsize_t>{3, 1, 3}}) {
    TempDir dir("mnddp-reader");
    write_sparse_chunks(dir.file("sparse.h5"), chunk);
    H5Reader reader(scan_shards({dir.file("sparse.h5")}, "x", "y"));
    for (const std::vector<std::int64_t>& wanted :
         {std::vector<std::int64_t>{9, 1, 4, 0, 1, 5, 3, 2, 9}, std::vector<std::int64_t>{7, 1, 6, 9, 1, 8, 0}}) {
      std::vector<float> x(wanted.size() * 6);
      std::vector<float> stored(wanted.size() * 6);
      std::vector<std::int64_t> y(wanted.size());
      reader.read(wanted, x.data(), y.data());
      reader.read_stored(wanted, stored.data(), nullptr);
      for (std::size_t i = 0; i < wanted.size(); ++i) {
        EXPECT_EQ(y[i], wanted[i] * 10 + 1) << "position " << i;
        for (std::int64_t j = 0; j < 6; ++j) {
          const bool written = wanted[i] < 6 || wanted[i] == 9;
          const float expected = written ? static_cast<float>(value_of(wanted[i], j, true, true)) : 0.0f;
          EXPECT_EQ(x[i * 6 + static_cast<std::size_t>(j)], expected) << "sample " << wanted[i] << " element " << j;
          EXPECT_EQ(stored[i * 6 + static_cast<std::size_t>(j)], expected) << "stored sample " << wanted[i];
        }
      }
    }
  }
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

// A sample of no values (x shaped [N, 0] or [N, 3, 0]; targets shaped [N, 0]) is refused at the scan,
// naming the file and the shape: its rows would be empty buffers to every reader and batch downstream
// (the shard fuzzer's input tests/fuzz/corpus/fuzz_shard/zero-width-rows.h5).
TEST(ScanShards, SamplesOfNoValuesAreRefused) {
  TempDir dir("mnddp-scan");
  for (const std::vector<hsize_t>& shape : {std::vector<hsize_t>{0}, std::vector<hsize_t>{3, 0}}) {
    ShardSpec spec;
    spec.sample_shape = shape;
    write_shard(dir.file("narrow.h5"), spec);
    const auto message = scan_error({dir.file("narrow.h5")});
    EXPECT_NE(message.find(dir.file("narrow.h5")), std::string::npos) << message;
    EXPECT_NE(message.find("at least one value"), std::string::npos) << message;
  }
  write_shard(dir.file("narrow_y.h5"), {});
  {
    H5Handle file(H5Fopen(dir.file("narrow_y.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file);
    const double none = 0;
    testing_support::write_dataset(file.get(), "t", H5T_IEEE_F32LE, {5, 0}, H5T_NATIVE_DOUBLE, &none, false);
  }
  try {
    scan_shards({dir.file("narrow_y.h5")}, "x", "t", LabelKind::Value);
    ADD_FAILURE() << "scan_shards accepted targets of no values";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("target must hold at least one value"), std::string::npos) << e.what();
  }
}

// An empty shard holds nothing to train on: it is skipped (with a warning naming it), and only a
// data set whose every shard is empty stops the run, naming the file.
TEST(ScanShards, EmptyShardIsSkippedUnlessEveryShardIsEmpty) {
  TempDir dir("mnddp-scan");
  write_shard(dir.file("a.h5"), {});
  ShardSpec empty;
  empty.count = 0;
  write_shard(dir.file("empty.h5"), empty);
  write_shard(dir.file("empty2.h5"), empty);
  const ShardIndex index = scan_shards({dir.file("empty.h5"), dir.file("a.h5"), dir.file("empty2.h5")}, "x", "y");
  ASSERT_EQ(index.shards.size(), 1u);
  EXPECT_EQ(index.shards[0].path, dir.file("a.h5"));
  EXPECT_EQ(index.num_samples(), 5);
  const auto message = scan_error({dir.file("empty.h5"), dir.file("empty2.h5")});
  EXPECT_NE(message.find(dir.file("empty.h5")), std::string::npos) << message;
  EXPECT_NE(message.find("0 samples"), std::string::npos) << message;
  EXPECT_NE(message.find("the other 1 files"), std::string::npos) << message;
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
  index.shards = {{"/data/a b.h5", 10, -2, 7, 4}, {"/data/\"quoted\".h5", 3, 0, 1, 0}};
  index.sample_shape = {3, 32, 32};
  index.sample_type = SampleType::U8;
  index.x_name = "images";
  index.y_name = "labels";
  const ShardIndex copy = ShardIndex::deserialize(index.serialize());
  EXPECT_EQ(copy.shards.size(), 2u);
  EXPECT_EQ(copy.shards[1].path, "/data/\"quoted\".h5");
  EXPECT_EQ(copy.shards[0].num_samples, 10);
  EXPECT_EQ(copy.shards[0].label_min, -2);
  EXPECT_EQ(copy.shards[0].label_max, 7);
  EXPECT_EQ(copy.shards[0].chunk_rows, 4);
  // --shuffle-unit chunk's units: 10 rows in chunks of 4 (an edge chunk of 2), an unchunked shard
  // in pieces of the given size.
  EXPECT_EQ(copy.chunk_sizes(2), (std::vector<std::int64_t>{4, 4, 2, 2, 1}));
  EXPECT_TRUE(copy.has_class_labels());
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

}  // namespace
}  // namespace mnddp

namespace mnddp {
namespace {

// 50 rows of 3x4 values (row r, element j: r * 100 + j) in chunks of 7 rows (the last one an edge
// chunk), with `filters` on; chunk 3 is written raw with deflate skipped (its filter mask set), as
// H5Dwrite_chunk lets writers do.
void write_filtered(const std::string& path, hid_t type, const std::function<void(hid_t)>& filters,
                    bool raw_chunk = false) {
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  const std::vector<hsize_t> dims = {50, 3, 4}, chunk = {7, 3, 4};
  H5Handle space(H5Screate_simple(3, dims.data(), nullptr));
  H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(props.get(), 3, chunk.data());
  filters(props.get());
  H5Handle x(H5Dcreate2(file.get(), "x", type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
  std::vector<double> values(50 * 12);
  for (std::size_t r = 0; r < 50; ++r)
    for (std::size_t j = 0; j < 12; ++j) values[r * 12 + j] = static_cast<double>(r * 100 + j);
  ASSERT_GE(H5Dwrite(x.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  if (raw_chunk) {
    // Chunk 3 (rows 21-27) stored shuffled but not deflated: filter 1 (deflate) skipped.
    std::vector<float> rows(values.begin() + 21 * 12, values.begin() + 28 * 12);
    std::vector<unsigned char> shuffled(rows.size() * 4);
    const auto* bytes = reinterpret_cast<const unsigned char*>(rows.data());
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t b = 0; b < 4; ++b) shuffled[b * rows.size() + i] = bytes[i * 4 + b];
    const hsize_t offset[3] = {21, 0, 0};
    ASSERT_GE(H5Dwrite_chunk(x.get(), H5P_DEFAULT, /*filter_mask=*/0x2, offset, shuffled.size(), shuffled.data()), 0);
  }
  std::vector<std::int64_t> labels(50);
  std::iota(labels.begin(), labels.end(), 0);
  const hsize_t label_dims = 50;
  H5Handle label_space(H5Screate_simple(1, &label_dims, nullptr));
  H5Handle y(H5Dcreate2(file.get(), "y", H5T_STD_I64LE, label_space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(H5Dwrite(y.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()), 0);
}

void expect_rows(H5Reader& reader, const std::vector<std::int64_t>& wanted, const char* what) {
  std::vector<float> x(wanted.size() * 12);
  std::vector<std::int64_t> y(wanted.size());
  reader.read(wanted, x.data(), y.data());
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    ASSERT_EQ(y[i], wanted[i]) << what;
    for (std::size_t j = 0; j < 12; ++j)
      ASSERT_EQ(x[i * 12 + j], static_cast<float>(wanted[i] * 100 + static_cast<std::int64_t>(j)))
          << what << ": sample " << wanted[i] << " element " << j;
  }
}

TEST(Reader, GzipAndShuffleChunksDecodedOnAPoolInAnyOrder) {
  TempDir dir("mnddp-reader");
  const auto gzip_shuffle = [](hid_t p) {
    H5Pset_shuffle(p);
    H5Pset_deflate(p, 6);
  };
  const std::vector<std::pair<std::string, std::function<void(hid_t)>>> pipelines = {
      {"gzip", [](hid_t p) { H5Pset_deflate(p, 1); }},
      {"shuffle+gzip", gzip_shuffle},
      {"shuffle", [](hid_t p) { H5Pset_shuffle(p); }},
      {"gzip+fletcher32 (HDF5's pipeline)", [](hid_t p) {
         H5Pset_deflate(p, 1);
         H5Pset_fletcher32(p);
       }}};
  std::vector<std::int64_t> shuffled(50);
  std::iota(shuffled.begin(), shuffled.end(), 0);
  std::reverse(shuffled.begin() + 10, shuffled.end());
  std::swap(shuffled[3], shuffled[40]);
  shuffled.insert(shuffled.end(), {27, 27, 49, 0});  // duplicates, both ends
  for (const auto& [name, filters] : pipelines) {
    const std::string path = dir.file(name.substr(0, 4) + std::to_string(name.size()) + ".h5");
    write_filtered(path, H5T_IEEE_F32LE, filters);
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(name + ", " + std::to_string(threads) + " decode threads");
      H5ReaderOptions options;
      options.decode_threads = threads;
      options.batch_size = 8;
      H5Reader reader(scan_shards({path}, "x", "y"), options);
      expect_rows(reader, shuffled, "shuffled");
      for (std::int64_t first = 0; first < 50; first += 8) {  // sequential batches reuse cached chunks
        std::vector<std::int64_t> batch;
        for (std::int64_t i = first; i < std::min<std::int64_t>(50, first + 8); ++i) batch.push_back(i);
        expect_rows(reader, batch, "sequential");
      }
    }
  }
  // A chunk whose filter mask skips deflate is read as stored (shuffled only).
  write_filtered(dir.file("raw.h5"), H5T_IEEE_F32LE, gzip_shuffle, /*raw_chunk=*/true);
  H5Reader reader(scan_shards({dir.file("raw.h5")}, "x", "y"));
  expect_rows(reader, shuffled, "raw chunk");
}

// One batch across shards of every kind: gzip and shuffle+gzip (decoded by mnddp, the chunks of both
// shards together), unfiltered (direct reads) and gzip+fletcher32 (HDF5's pipeline), interleaved,
// with duplicates, touching more compressed chunks (8) than the decoded-chunk cache keeps (4): the
// batch's chunks stay until its last row is copied.
TEST(Reader, OneBatchAcrossCompressedAndOtherShards) {
  TempDir dir("mnddp-reader");
  const std::vector<std::function<void(hid_t)>> pipelines = {[](hid_t p) { H5Pset_deflate(p, 1); }, [](hid_t) {},
                                                             [](hid_t p) {
                                                               H5Pset_shuffle(p);
                                                               H5Pset_deflate(p, 6);
                                                             },
                                                             [](hid_t p) {
                                                               H5Pset_deflate(p, 1);
                                                               H5Pset_fletcher32(p);
                                                             }};
  std::vector<std::string> paths;
  for (std::size_t s = 0; s < pipelines.size(); ++s) {
    paths.push_back(dir.file("shard" + std::to_string(s) + ".h5"));
    write_filtered(paths.back(), H5T_IEEE_F32LE, pipelines[s]);
  }
  std::vector<std::int64_t> wanted;
  for (const std::int64_t row : {49, 0, 27, 7, 27})  // chunks 7, 0, 3, 1 of every shard
    for (std::int64_t s = 3; s >= 0; --s) wanted.push_back(s * 50 + row);
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " decode threads");
    H5ReaderOptions options;
    options.decode_threads = threads;
    options.batch_size = 8;
    H5Reader reader(scan_shards(paths, "x", "y"), options);
    for (int pass = 0; pass < 2; ++pass) {  // the second from the cache, partly
      std::vector<float> x(wanted.size() * 12);
      std::vector<std::int64_t> y(wanted.size());
      reader.read(wanted, x.data(), y.data());
      for (std::size_t i = 0; i < wanted.size(); ++i) {
        const std::int64_t row = wanted[i] % 50;
        ASSERT_EQ(y[i], row) << "sample " << wanted[i];
        for (std::size_t j = 0; j < 12; ++j)
          ASSERT_EQ(x[i * 12 + j], static_cast<float>(row * 100 + static_cast<std::int64_t>(j)))
              << "sample " << wanted[i] << " element " << j;
      }
    }
  }
}

TEST(Reader, ACorruptCompressedChunkNamesTheFileAndTheChunk) {
  TempDir dir("mnddp-reader");
  const std::string path = dir.file("bad.h5");
  write_filtered(path, H5T_IEEE_F32LE, [](hid_t p) { H5Pset_deflate(p, 6); });
  haddr_t address = HADDR_UNDEF;
  {
    H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    H5Handle x(H5Dopen2(file.get(), "x", H5P_DEFAULT));
    const hsize_t at[3] = {14, 0, 0};  // chunk 2
    unsigned mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(x.get(), at, &mask, &address, &size), 0);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(address + 2));
    f.write("\xde\xad\xbe\xef", 4);
  }
  for (const int threads : {1, 3}) {
    H5ReaderOptions options;
    options.decode_threads = threads;
    H5Reader reader(scan_shards({path}, "x", "y"), options);
    std::vector<std::int64_t> wanted = {0, 7, 15, 30, 45};  // chunks 0, 1, 2, 4, 6
    std::vector<float> x(wanted.size() * 12);
    try {
      reader.read(wanted, x.data(), nullptr);
      FAIL() << "a corrupt chunk was read";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("chunk 2"), std::string::npos) << e.what();
      // mnddp's decoder, not HDF5's pipeline, read it (this message is ours).
      EXPECT_NE(std::string(e.what()).find("does not inflate"), std::string::npos) << e.what();
    }
    expect_rows(reader, {0, 8, 30, 49}, "the other chunks after the error");
  }
}

}  // namespace
}  // namespace mnddp
