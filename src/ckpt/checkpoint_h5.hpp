// Internal to ckpt/: the HDF5 side of checkpoint files shared by the writer and the reader: the
// DType <-> HDF5 mapping, string and integer attributes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/comm/dtype.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp::ckpt_detail {

// An array's HDF5 type in the file (little-endian, whatever the writer) and in memory.
hid_t file_type(DType dtype);
hid_t memory_type(DType dtype);
// The DType named by an array's "dtype" attribute; UsageError naming `where` when unknown.
DType dtype_from_name(const std::string& name, const std::string& where);
std::int64_t product(const std::vector<std::int64_t>& shape);

// Selects the elements [first, first + count) of `space` (an array of `shape`) in C order: a head
// and a tail of partial rows around whole rows, recursively, as a union of hyperslabs. HDF5 walks a
// selection in C order, so a 1-D memory buffer of `count` elements maps onto it one to one.
void select_flat_range(hid_t space, const std::vector<std::int64_t>& shape, std::int64_t first, std::int64_t count);

// An array of a checkpoint opened for reading: its dataset, its space, its "dtype" attribute and its
// dimensions. Throws `missing` when there is no such array (UsageError; CorruptCheckpoint while
// verifying), CorruptCheckpoint when its dtype is not valid. Under hdf5_mutex().
struct OpenArray {
  H5Handle dataset;
  H5Handle space;
  DType dtype = DType::U8;
  std::vector<hsize_t> dims;
  std::vector<std::int64_t> shape() const { return {dims.begin(), dims.end()}; }
};
OpenArray open_array(hid_t file, const std::string& file_path, const std::string& array, bool missing_is_corrupt);

// Writes a string attribute on `object` (collective in parallel HDF5: same value everywhere).
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
std::string read_string_attribute(hid_t object, const std::string& name);
void write_u32_attribute(hid_t object, const std::string& name, std::uint32_t value);
void write_u64_attribute(hid_t object, const std::string& name, std::uint64_t value);

}  // namespace mnddp::ckpt_detail
