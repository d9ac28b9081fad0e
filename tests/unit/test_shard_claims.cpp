// What a shard claims is checked before any buffer is sized from it. Its label or target type's
// width: HDF5 converts one whole element at a time, so a crafted integer type of 2 GB would cost a
// 2 GB buffer (numbers up to 16 bytes wide, np.longdouble, are read as before). Its chunks' stored
// extents: a chunk claimed past the file's end would size the decoder's scratch.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "h5_fixtures.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"

using namespace mnddp;
using namespace mnddp::testing_support;

namespace {

// A shard of 5 samples whose labels `y` are stored as `y_type`.
std::string shard_with_labels(const TempDir& dir, const std::string& name, hid_t y_type) {
  ShardSpec spec;
  spec.y_type = y_type;
  write_shard(dir.file(name), spec);
  return dir.file(name);
}

}  // namespace

TEST(ShardClaims, LabelsWiderThanSixteenBytesAreRefused) {
  TempDir dir("mnddp-shard-claims");
  H5Handle wide(H5Tcopy(H5T_STD_I64LE));
  ASSERT_GE(H5Tset_size(wide.get(), 32), 0);
  const std::string path = shard_with_labels(dir, "wide.h5", wide.get());
  for (const LabelKind kind : {LabelKind::Class, LabelKind::Value}) {
    try {
      scan_shards({path}, "x", "y", kind);
      ADD_FAILURE() << "labels of 32-byte integers were accepted";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + path + "': dataset 'y' has 32-byte elements"), std::string::npos) << what;
    }
  }
}

TEST(ShardClaims, SixteenByteTargetsAreStillRead) {
  TempDir dir("mnddp-shard-claims");
  H5Handle sixteen(H5Tcopy(H5T_STD_I64LE));
  ASSERT_GE(H5Tset_size(sixteen.get(), 16), 0);
  const ShardIndex labels = scan_shards({shard_with_labels(dir, "i128.h5", sixteen.get())}, "x", "y");
  EXPECT_EQ(labels.num_samples(), 5);
  EXPECT_EQ(labels.shards[0].label_max, default_label(4));
  const ShardIndex targets =
      scan_shards({shard_with_labels(dir, "ld.h5", H5T_NATIVE_LDOUBLE)}, "x", "y", LabelKind::Value);
  EXPECT_EQ(targets.num_samples(), 5);
}

// A gzip-chunked shard (found by fuzz_shard) whose chunk index claims a 4 GB chunk in a 6945-byte
// file: refused from the index, before the decoder sizes its scratch from the claim.
TEST(ShardClaims, AChunkStoredPastTheFilesEndIsRefusedBeforeAnyBufferIsSized) {
  const std::string path = std::string(MNDDP_TEST_FIXTURES) + "/forged-chunk-extent.h5";
  ShardIndex index = scan_shards({path}, "x", "y");
  ASSERT_GT(index.num_samples(), 0);
  const auto numel = static_cast<std::size_t>(index.sample_numel());
  const std::int64_t rows[] = {0};
  H5Reader reader(std::move(index));
  std::vector<float> x(numel);
  std::vector<std::int64_t> y(1);
  try {
    reader.read(rows, x.data(), y.data());
    ADD_FAILURE() << "a chunk stored past the file's end was read";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dataset 'x' chunk 0 claims 4177527307 bytes at offset 6384, past the file's end"),
              std::string::npos)
        << what;
  }
}
