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

// Writes a string attribute on `object` (collective in parallel HDF5: same value everywhere).
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
std::string read_string_attribute(hid_t object, const std::string& name);
void write_u32_attribute(hid_t object, const std::string& name, std::uint32_t value);
void write_u64_attribute(hid_t object, const std::string& name, std::uint64_t value);

}  // namespace mnddp::ckpt_detail
