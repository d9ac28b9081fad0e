// Small HDF5 shards written with the raw C API for the data tests: values a test can recompute
// (value_of), any element type, optional gzip chunks, bad labels or non-finite inputs on request.
// Header-only: each test binary includes it from one file.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "mnddp/data/shard_index.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "test_support.hpp"

namespace mnddp::testing_support {

// Expected failures would otherwise print HDF5's own error stacks.
class SilenceHdf5 : public ::testing::Environment {
 public:
  void SetUp() override { h5_silence_default_errors(); }
};
inline const auto* const kSilenceHdf5 = ::testing::AddGlobalTestEnvironment(new SilenceHdf5);

// x[global sample s, element j]: exact in every tested dtype, and different per sample and element.
inline double value_of(std::int64_t s, std::int64_t j, bool is_signed, bool fractional) {
  const double v = static_cast<double>((s * 7 + j * 3) % 100) - (is_signed ? 50.0 : 0.0);
  return fractional ? v + 0.5 : v;
}

// The default label of global sample s: distinct per sample, so a test sees which sample it got.
inline std::int64_t default_label(std::int64_t s) { return s * 10 + 1; }

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
  std::function<std::int64_t(std::int64_t)> label_of = default_label;
  std::int64_t nonfinite_sample = -1;  // global sample whose element 1 becomes nonfinite_value
  double nonfinite_value = std::numeric_limits<double>::quiet_NaN();
};

inline void write_dataset(hid_t file, const char* name, hid_t type, const std::vector<hsize_t>& dims, hid_t memory_type,
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

inline void write_shard(const std::string& path, const ShardSpec& spec) {
  std::int64_t numel = 1;
  for (auto d : spec.sample_shape) numel *= static_cast<std::int64_t>(d);
  std::vector<double> x;
  for (std::int64_t s = spec.first; s < spec.first + spec.count; ++s)
    for (std::int64_t j = 0; j < numel; ++j)
      x.push_back(s == spec.nonfinite_sample && j == 1 ? spec.nonfinite_value
                                                       : value_of(s, j, spec.is_signed, spec.fractional));
  const std::int64_t y_count = spec.y_count < 0 ? spec.count : spec.y_count;
  std::vector<std::int64_t> y;
  for (std::int64_t s = spec.first; s < spec.first + y_count; ++s) y.push_back(spec.label_of(s));

  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(file) << path;
  std::vector<hsize_t> x_dims{static_cast<hsize_t>(spec.count)};
  x_dims.insert(x_dims.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  write_dataset(file.get(), spec.x_name, spec.x_type, x_dims, H5T_NATIVE_DOUBLE, x.data(), spec.gzip_chunks);
  write_dataset(file.get(), spec.y_name, spec.y_type, {static_cast<hsize_t>(y_count)}, H5T_NATIVE_INT64, y.data(),
                false);
}

// Writes shards `a` and `b` as DIR/NAME_A and DIR/NAME_B and scans them (two files are the smallest
// case with a file boundary). Set b.first = a.first + a.count for consecutive global indices.
inline ShardIndex two_shards(const TempDir& dir, const ShardSpec& a, const ShardSpec& b,
                             const std::string& name_a = "a.h5", const std::string& name_b = "b.h5") {
  write_shard(dir.file(name_a), a);
  write_shard(dir.file(name_b), b);
  return scan_shards({dir.file(name_a), dir.file(name_b)}, "x", "y");
}

inline H5Handle copy_of(hid_t predefined) { return H5Handle(H5Tcopy(predefined)); }

// IEEE half as HDF5 1.10 can describe it (it has no predefined float16 type).
inline H5Handle float16_type() {
  H5Handle type = copy_of(H5T_IEEE_F32LE);
  H5Tset_fields(type.get(), 15, 10, 5, 0, 10);
  H5Tset_size(type.get(), 2);
  H5Tset_ebias(type.get(), 15);
  return type;
}

}  // namespace mnddp::testing_support
