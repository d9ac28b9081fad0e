// The parallel checkpoint writer on 2 and 3 ranks: every shape a model produces (scalars, empty
// arrays, fewer rows than ranks, rows that do not divide evenly, arrays read back in several
// pieces) comes back byte for byte, the stored XXH3-64 block checksum (its blocks hashed by
// different ranks) equals that of the whole array in memory, and one flipped byte on disk is reported
// as corruption. A format-1 checkpoint (CRC-32, tests/fixtures) is still read and verified.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/parallel_verify.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

using namespace mnddp;

namespace {

struct Case {
  std::string path;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // the same on every rank
};

std::vector<Case> cases() {
  auto make = [](std::string path, DType dtype, std::vector<std::int64_t> shape) {
    Case c{std::move(path), dtype, std::move(shape), {}};
    std::size_t n = dtype_size(dtype);
    for (auto d : c.shape) n *= static_cast<std::size_t>(d);
    c.bytes.resize(n);
    for (std::size_t i = 0; i < n; ++i) c.bytes[i] = static_cast<std::uint8_t>((i * 131 + c.path.size()) % 251);
    return c;
  };
  return {
      make("scalar/f64", DType::F64, {}),
      make("empty/flat", DType::F32, {0}),
      make("empty/rows", DType::F32, {0, 4}),
      make("model/one_row", DType::F32, {1, 5}),  // fewer rows than ranks
      make("model/uneven", DType::I64, {7, 3}),   // 7 rows over 2 or 3 ranks
      make("model/flat", DType::BF16, {11}),
      make("model/bytes", DType::U8, {4, 3, 2}),
      make("model/two_blocks", DType::U8, {(1 << 20) + 7}),  // 2 checksum blocks: a rank with none on 3
      make("model/three_blocks", DType::F32, {5, 131072}),   // 2.5 MiB: one block per rank on 3
      make("model/large", DType::F32, {9000, 1024}),         // 36 MB: read back in 16 MB pieces
  };
}

std::string shared_directory(MpiComm& comm, std::optional<testing_support::TempDir>& owner) {
  std::string path;
  if (comm.is_root()) {
    owner.emplace("mnddp-ckpt-file");
    path = owner->path().string();
  }
  broadcast_string(comm, path, 0);
  return path;
}

// Every rank writes every case (each its rows) into `path` and closes it.
void write_cases(MpiComm& comm, const std::string& path, const std::vector<Case>& all, bool with_step = false) {
  ParallelCheckpointWriter writer(comm, comm.handle(), path);
  for (const auto& c : all) writer.write({c.path, c.dtype, c.shape, c.bytes.data()});
  if (with_step) writer.set_attribute("step", "12");
  writer.close();
}

// Flips bit `mask` of the byte `at` bytes into array `name`'s data in the file at `path`.
void flip_byte_of_array(const std::string& path, const std::string& name, std::size_t at, char mask) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(dataset);
  H5Dclose(dataset);
  H5Fclose(file);
  ASSERT_NE(offset, HADDR_UNDEF);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset + at));
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ mask);
  f.seekp(static_cast<std::streamoff>(offset + at));
  f.write(&byte, 1);
}

}  // namespace

TEST(CheckpointFile, EveryShapeRoundTripsWithWholeArrayChecksums) {
  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  const std::string path = shared_directory(comm, owner) + "/c.h5";
  const auto all = cases();
  write_cases(comm, path, all, /*with_step=*/true);
  comm.barrier();
  if (!comm.is_root()) return;
  {
    CheckpointReader reader(path);
    EXPECT_EQ(reader.attribute("step"), "12");
    reader.verify_all();
    for (const auto& c : all) {
      SCOPED_TRACE(c.path);
      const ArrayData data = reader.read(c.path);
      EXPECT_EQ(data.dtype, c.dtype);
      EXPECT_EQ(data.shape, c.shape);
      ASSERT_EQ(data.bytes.size(), c.bytes.size());
      EXPECT_TRUE(c.bytes.empty() || std::memcmp(data.bytes.data(), c.bytes.data(), c.bytes.size()) == 0);
    }
  }
  // The stored attribute is the array's checksum, whichever ranks hashed its blocks (what h5py users
  // check with the xxhash wheel).
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& c : all) {
    const hid_t dataset = H5Dopen2(file, c.path.c_str(), H5P_DEFAULT);
    const hid_t attribute = H5Aopen(dataset, "xxh3_64", H5P_DEFAULT);
    std::uint64_t stored = 0;
    H5Aread(attribute, H5T_NATIVE_UINT64, &stored);
    EXPECT_EQ(stored, array_checksum(c.bytes.data(), c.bytes.size())) << c.path;
    H5Aclose(attribute);
    H5Dclose(dataset);
  }
  H5Fclose(file);
}

TEST(CheckpointFile, AFlippedByteIsReportedAsCorruption) {
  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  const std::string path = shared_directory(comm, owner) + "/c.h5";
  const auto all = cases();
  write_cases(comm, path, all);
  comm.barrier();
  if (!comm.is_root()) return;
  // Flip one byte in the second piece of the large array (past the first 16 MB read).
  flip_byte_of_array(path, "model/large", 30u << 20, 0x40);
  CheckpointReader reader(path);
  EXPECT_NO_THROW(reader.read("model/uneven"));
  try {
    reader.read("model/large");
    FAIL() << "a flipped byte went unnoticed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'model/large' is corrupt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(reader.verify_all(), UsageError);
}

// Copies every array of the checkpoint at `from` into a new file `to`, stored chunked and
// gzip-compressed (as h5py users may rewrite one), with its attributes.
void rewrite_compressed(const std::string& from, const std::string& to, const std::vector<Case>& all) {
  const hid_t source = H5Fopen(from.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t target = H5Fcreate(to.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(source, 0);
  ASSERT_GE(target, 0);
  const hid_t links = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(links, 1);
  for (const auto& c : all) {
    const hid_t in = H5Dopen2(source, c.path.c_str(), H5P_DEFAULT);
    const hid_t type = H5Dget_type(in), space = H5Dget_space(in);
    const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk(c.shape.begin(), c.shape.end());
    if (!chunk.empty() && c.bytes.size() > 0) {
      chunk[0] = std::max<hsize_t>(1, chunk[0] / 3);
      H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data());
      H5Pset_deflate(create, 1);
    }
    const hid_t out = H5Dcreate2(target, c.path.c_str(), type, space, links, create, H5P_DEFAULT);
    ASSERT_GE(out, 0) << c.path;
    if (!c.bytes.empty()) {
      ASSERT_GE(H5Dwrite(out, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.bytes.data()), 0);
    }
    auto copy = [](hid_t location, const char* name, const H5A_info_t*, void* destination) -> herr_t {
      const hid_t attribute = H5Aopen(location, name, H5P_DEFAULT);
      const hid_t attribute_type = H5Aget_type(attribute), attribute_space = H5Aget_space(attribute);
      std::vector<char> value(static_cast<std::size_t>(H5Sget_simple_extent_npoints(attribute_space)) *
                              H5Tget_size(attribute_type));
      H5Aread(attribute, attribute_type, value.data());  // a string's pointer, for variable-length ones
      const hid_t copied = H5Acreate2(*static_cast<hid_t*>(destination), name, attribute_type, attribute_space,
                                      H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(copied, attribute_type, value.data());
      H5Aclose(copied);
      H5Sclose(attribute_space);
      H5Tclose(attribute_type);
      H5Aclose(attribute);
      return 0;
    };
    hid_t destination = out;
    H5Aiterate2(in, H5_INDEX_NAME, H5_ITER_INC, nullptr, copy, &destination);
    H5Dclose(out);
    H5Pclose(create);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(in);
  }
  H5Pclose(links);
  H5Fclose(target);
  H5Fclose(source);
}

// Arrays mnddp did not write contiguously (chunked, compressed) are read through HDF5 rather than
// by pread, and verified the same way.
TEST(CheckpointFile, ChunkedCompressedArraysAreReadThroughHdf5AndVerified) {
  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  const std::string directory = shared_directory(comm, owner);
  const auto all = cases();
  write_cases(comm, directory + "/c.h5", all);
  comm.barrier();
  if (!comm.is_root()) return;
  const std::string path = directory + "/compressed.h5";
  rewrite_compressed(directory + "/c.h5", path, all);
  {
    CheckpointReader reader(path);
    EXPECT_NO_THROW(reader.verify_all());
    for (const auto& c : all) {
      SCOPED_TRACE(c.path);
      const ArrayData data = reader.read(c.path);
      EXPECT_EQ(data.shape, c.shape);
      ASSERT_EQ(data.bytes.size(), c.bytes.size());
      EXPECT_TRUE(c.bytes.empty() || std::memcmp(data.bytes.data(), c.bytes.data(), c.bytes.size()) == 0);
    }
  }
  // A changed value (written through HDF5, so the chunk still inflates) is found.
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, "model/large", H5P_DEFAULT);
  const hid_t file_space = H5Dget_space(dataset);
  const hsize_t at[2] = {7000, 5}, one[2] = {1, 1};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, at, nullptr, one, nullptr);
  const hid_t memory_space = H5Screate_simple(2, one, nullptr);
  const float changed = 12345.0f;
  ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space, file_space, H5P_DEFAULT, &changed), 0);
  H5Sclose(memory_space);
  H5Sclose(file_space);
  H5Dclose(dataset);
  H5Fclose(file);
  CheckpointReader reader(path);
  try {
    reader.read("model/large");
    FAIL() << "a changed value in a compressed array went unnoticed";
  } catch (const CorruptCheckpoint& e) {
    EXPECT_NE(std::string(e.what()).find("'model/large' is corrupt"), std::string::npos) << e.what();
  }
}

TEST(CheckpointFile, AFormat1CheckpointIsStillReadAndVerified) {
  MpiComm comm;
  if (!comm.is_root()) return;
  // Written by mnddp before format 2 (2 ranks, an MLP with AdamW): CRC-32 per array.
  const std::string fixture = std::string(MNDDP_TEST_FIXTURES) + "/checkpoint-v1-crc32.h5";
  {
    CheckpointReader reader(fixture);
    EXPECT_EQ(reader.attribute("format_version"), "1");
    EXPECT_NO_THROW(reader.verify_all());
    EXPECT_EQ(reader.read("model/body.0.weight").shape, (std::vector<std::int64_t>{4, 16}));
  }
  testing_support::TempDir dir("mnddp-ckpt-v1");
  const std::string copy = dir.file("v1.h5");
  std::filesystem::copy_file(fixture, copy);
  flip_byte_of_array(copy, "model/body.0.weight", 17, 0x5a);
  CheckpointReader reader(copy);
  try {
    reader.read("model/body.0.weight");
    FAIL() << "a changed byte in a format-1 array went unnoticed";
  } catch (const CorruptCheckpoint& e) {
    EXPECT_NE(std::string(e.what()).find("CRC-32"), std::string::npos) << e.what();
  }
}

namespace {

// The cut points of a case's elements among the ranks: shares that straddle checksum blocks, with
// pattern 1 putting a whole share inside a block another rank starts (on 3 ranks).
std::vector<std::int64_t> share_cuts(const Case& c, int world, int pattern) {
  const auto element = static_cast<std::int64_t>(dtype_size(c.dtype));
  const auto n = static_cast<std::int64_t>(c.bytes.size()) / element;
  const auto block = static_cast<std::int64_t>(kChecksumBlockBytes);
  std::vector<std::int64_t> cuts = {0};
  for (int r = 1; r < world; ++r) {
    std::int64_t cut = n * r / world + 1;
    if (n * element > block)
      cut = pattern == 0 ? (r * block + (r % 2 == 1 ? -100 : 100)) / element : (block - 300 + 100 * r) / element;
    cuts.push_back(std::clamp(cut, cuts.back(), n));
  }
  cuts.push_back(n);
  return cuts;
}

}  // namespace

// Shares written by every rank (ZeRO's optimizer state) make the very array write() makes: the same
// bytes and the same stored checksum, whichever rank completed which block; and each rank reads its
// share back.
TEST(CheckpointFile, SharesMakeTheSameArraysAsWholeWrites) {
  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  const std::string directory = shared_directory(comm, owner);
  std::vector<Case> all;
  for (auto& c : cases())
    if (!c.shape.empty()) all.push_back(std::move(c));
  for (int pattern : {0, 1}) {
    SCOPED_TRACE(pattern);
    const std::string path = directory + "/shares" + std::to_string(pattern) + ".h5";
    {
      ParallelCheckpointWriter writer(comm, comm.handle(), path);
      for (const auto& c : all) {
        const auto cuts = share_cuts(c, comm.size(), pattern);
        const std::int64_t first = cuts[static_cast<std::size_t>(comm.rank())];
        const std::int64_t count = cuts[static_cast<std::size_t>(comm.rank()) + 1] - first;
        writer.write_share({c.path, c.dtype, c.shape, first, count,
                            c.bytes.data() + static_cast<std::size_t>(first) * dtype_size(c.dtype)});
      }
      writer.close();
    }
    comm.barrier();
    CheckpointReader reader(path);
    for (const auto& c : all) {
      SCOPED_TRACE(c.path);
      const auto cuts = share_cuts(c, comm.size(), pattern);
      const std::int64_t first = cuts[static_cast<std::size_t>(comm.rank())];
      const std::int64_t count = cuts[static_cast<std::size_t>(comm.rank()) + 1] - first;
      std::vector<std::int64_t> shape;
      const ArrayData share = reader.read_share(c.path, first, count, &shape);
      EXPECT_EQ(shape, c.shape);
      ASSERT_EQ(share.bytes.size(), static_cast<std::size_t>(count) * dtype_size(c.dtype));
      // memcmp of nothing may be handed null pointers, which UBSan (scripts/asan.sh) refuses.
      EXPECT_TRUE(share.bytes.empty() ||
                  std::memcmp(share.bytes.data(),
                              c.bytes.data() + static_cast<std::size_t>(first) * dtype_size(c.dtype),
                              share.bytes.size()) == 0);
      if (!comm.is_root()) continue;
      const ArrayData whole = reader.read(c.path);  // verifies the stored checksum
      ASSERT_EQ(whole.bytes.size(), c.bytes.size());
      EXPECT_TRUE(c.bytes.empty() || std::memcmp(whole.bytes.data(), c.bytes.data(), c.bytes.size()) == 0);
    }
  }
}

// Every rank verifies its share of every array's blocks: a good file passes with its step, one
// flipped byte is corruption on every rank, naming the array.
TEST(CheckpointFile, ParallelVerificationAgreesOnEveryRank) {
  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  const std::string path = shared_directory(comm, owner) + "/c.h5";
  write_cases(comm, path, cases(), /*with_step=*/true);
  comm.barrier();
  {
    ParallelCheckpointWriter attributes(comm, comm.handle(), path + ".fv");  // no format_version
    attributes.close();
  }
  const CheckpointVerdict no_header = verify_checkpoint_in_parallel(comm, path + ".fv");
  EXPECT_EQ(no_header.kind, CheckpointVerdict::Kind::Corrupt);
  // write_cases sets only `step`; a format version makes it a checkpoint.
  if (comm.is_root()) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(file, "format_version", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* two = "2";
    H5Awrite(attribute, type, &two);
    H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(file);
  }
  comm.barrier();
  const CheckpointVerdict good = verify_checkpoint_in_parallel(comm, path);
  EXPECT_EQ(good.kind, CheckpointVerdict::Kind::Good) << good.message;
  EXPECT_EQ(good.step, 12);
  comm.barrier();
  if (comm.is_root()) flip_byte_of_array(path, "model/large", 30u << 20, 0x40);
  comm.barrier();
  const CheckpointVerdict bad = verify_checkpoint_in_parallel(comm, path);
  EXPECT_EQ(bad.kind, CheckpointVerdict::Kind::Corrupt);
  EXPECT_NE(bad.message.find("'model/large' is corrupt"), std::string::npos) << bad.message;
}
