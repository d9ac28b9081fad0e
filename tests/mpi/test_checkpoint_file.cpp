// The parallel checkpoint writer on 2 and 3 ranks: every shape a model produces (scalars, empty
// arrays, fewer rows than ranks, rows that do not divide evenly, arrays read back in several
// pieces) comes back byte for byte, the stored CRC-32 (combined from the ranks' slabs) equals zlib's
// CRC of the whole array, and one flipped byte on disk is reported as corruption.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
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
      make("model/large", DType::F32, {9000, 1024}),  // 36 MB: read back in 16 MB pieces
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
      EXPECT_EQ(std::memcmp(data.bytes.data(), c.bytes.data(), c.bytes.size()), 0);
    }
  }
  // The stored attribute is the plain CRC-32 of the array (what h5py users check with zlib).
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& c : all) {
    const hid_t dataset = H5Dopen2(file, c.path.c_str(), H5P_DEFAULT);
    const hid_t attribute = H5Aopen(dataset, "crc32", H5P_DEFAULT);
    std::uint32_t stored = 0;
    H5Aread(attribute, H5T_NATIVE_UINT32, &stored);
    EXPECT_EQ(stored, static_cast<std::uint32_t>(crc32_z(0, c.bytes.data(), c.bytes.size()))) << c.path;
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
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, "model/large", H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(dataset);
  H5Dclose(dataset);
  H5Fclose(file);
  ASSERT_NE(offset, HADDR_UNDEF);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset + (30u << 20)));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x40);
    f.seekp(static_cast<std::streamoff>(offset + (30u << 20)));
    f.write(&byte, 1);
  }
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
