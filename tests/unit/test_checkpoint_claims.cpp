// A checkpoint file's claims about an array are checked against what it stores before any read is
// sized from them: an element type wider than the array's dtype (HDF5 1.10 would allocate one
// element's conversion buffer: 2 GB from a 40 KB file the checkpoint fuzzer made), a contiguous
// array's shape that its stored bytes do not fill, and a shape whose size overflows.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

using namespace mnddp;

namespace {

void string_attribute(hid_t object, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, value.data());
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

// One array `name` in a new file at `path`: stored as `type` with `dims`, named `dtype`, with a
// checksum attribute; written (allocated) only when `write` is set.
void make_array(const std::string& path, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                const std::string& dtype, bool chunked, bool write) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    const std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data());
  } else {
    H5Pset_layout(create, H5D_CONTIGUOUS);
    H5Pset_alloc_time(create, H5D_ALLOC_TIME_LATE);
  }
  const hid_t dataset = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, create, H5P_DEFAULT);
  ASSERT_GE(dataset, 0) << name;
  if (write) {
    hsize_t n = 1;
    for (auto d : dims) n *= d;
    const std::vector<unsigned char> zeros(n * H5Tget_size(type), 0);
    H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  }
  string_attribute(dataset, "dtype", dtype);
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t checksum = H5Acreate2(dataset, "crc32", H5T_STD_U64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const unsigned long long zero = 0;
  H5Awrite(checksum, H5T_NATIVE_ULLONG, &zero);
  H5Aclose(checksum);
  H5Sclose(scalar);
  H5Dclose(dataset);
  H5Pclose(create);
  H5Sclose(space);
  H5Fclose(file);
}

// Reading `name` (alone, and with the whole file's verification) is refused as corruption naming it
// and `needle`.
void expect_refused(const std::string& path, const std::string& name, const std::string& needle) {
  for (const bool whole_file : {false, true}) {
    try {
      CheckpointReader reader(path);
      if (whole_file)
        reader.verify_all();
      else
        reader.read(name);
      ADD_FAILURE() << name << ": read without complaint";
    } catch (const CorruptCheckpoint& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("array '" + name + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  }
}

}  // namespace

TEST(CheckpointClaims, AnElementTypeWiderThanTheDtypeIsRefused) {
  testing_support::TempDir dir("mnddp-ckpt-claims");
  const std::string path = dir.file("wide.h5");
  make_array(path, "w", H5T_STD_I64LE, {4}, "float32", /*chunked=*/false, /*write=*/true);
  expect_refused(path, "w", "stores 8-byte elements, but its dtype float32 has 4");
}

TEST(CheckpointClaims, AContiguousShapeItsBytesDoNotFillIsRefused) {
  testing_support::TempDir dir("mnddp-ckpt-claims");
  const std::string path = dir.file("unwritten.h5");
  // Never written: HDF5 would read 1.6 GB of fill values; the file holds none of them.
  make_array(path, "w", H5T_IEEE_F32LE, {20000, 20000}, "float32", /*chunked=*/false, /*write=*/false);
  expect_refused(path, "w", "holds 0 bytes, but its shape (20000 x 20000) needs 1600000000");
}

TEST(CheckpointClaims, AShapeWhoseSizeOverflowsIsRefused) {
  testing_support::TempDir dir("mnddp-ckpt-claims");
  const std::string path = dir.file("huge.h5");
  // Chunked, so HDF5 creates it without storage: 2^33 x 2^33 x 4 bytes does not fit in 64 bits.
  make_array(path, "w", H5T_IEEE_F32LE, {hsize_t{1} << 33, hsize_t{1} << 33}, "float32", /*chunked=*/true,
             /*write=*/false);
  expect_refused(path, "w", "a shape too large to address: 8589934592 x 8589934592");
}

TEST(CheckpointClaims, AWellFormedArrayPassesTheChecks) {
  testing_support::TempDir dir("mnddp-ckpt-claims");
  const std::string path = dir.file("good.h5");
  make_array(path, "w", H5T_IEEE_F32LE, {3, 2}, "float32", /*chunked=*/false, /*write=*/true);
  CheckpointReader reader(path);
  try {
    reader.read("w");
    FAIL() << "the zero checksum should not match";
  } catch (const CorruptCheckpoint& e) {
    // Past the claims, to the checksum: the array was read.
    EXPECT_NE(std::string(e.what()).find("is corrupt (CRC-32"), std::string::npos) << e.what();
  }
}
