// The HDF5 side of checkpoint files: types, attributes, checksums.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <stdexcept>

#include "checkpoint_h5.hpp"
#include "mnddp/check.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace ckpt_detail {
namespace {

// DType <-> HDF5: the array's type in the file (little-endian, whatever the writer) and in memory.
// Half-precision arrays are stored as uint16 with a "dtype" attribute saying which kind: HDF5 1.10
// has no bfloat16, and h5py users view the raw bits (np.uint16 -> float16 / bfloat16) themselves.
struct H5Types {
  hid_t file;
  hid_t memory;
};

H5Types h5_types(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return {H5T_IEEE_F32LE, H5T_NATIVE_FLOAT};
    case DType::F64:
      return {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE};
    case DType::F16:
    case DType::BF16:
      return {H5T_STD_U16LE, H5T_NATIVE_UINT16};
    case DType::I32:
      return {H5T_STD_I32LE, H5T_NATIVE_INT32};
    case DType::I64:
      return {H5T_STD_I64LE, H5T_NATIVE_INT64};
    case DType::U8:
      return {H5T_STD_U8LE, H5T_NATIVE_UINT8};
  }
  throw std::logic_error("h5_types: unknown dtype");
}

H5Handle string_type(std::size_t length) {
  H5Handle type(H5Tcopy(H5T_C_S1));
  MNDDP_H5_CHECK(type.get());
  MNDDP_H5_CHECK(H5Tset_size(type.get(), std::max<std::size_t>(1, length)));
  MNDDP_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  return type;
}

}  // namespace

hid_t file_type(DType dtype) { return h5_types(dtype).file; }
hid_t memory_type(DType dtype) { return h5_types(dtype).memory; }

DType dtype_from_name(const std::string& name, const std::string& where) {
  if (auto dtype = mnddp::dtype_from_name(name)) return *dtype;
  throw UsageError(fmt::format("{}: unknown array dtype '{}'", where, name));
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  H5Handle type = string_type(value.size());
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attribute(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  MNDDP_H5_CHECK(H5Awrite(attribute.get(), type.get(), padded.data()));
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  H5Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  H5Handle type(H5Aget_type(attribute.get()));
  if (H5Tis_variable_str(type.get()) > 0) {
    char* text = nullptr;
    H5Handle memory(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
    MNDDP_H5_CHECK(H5Aread(attribute.get(), memory.get(), &text));
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  std::string value(H5Tget_size(type.get()), '\0');
  MNDDP_H5_CHECK(H5Aread(attribute.get(), type.get(), value.data()));
  return value.substr(0, value.find('\0'));
}

void write_u32_attribute(hid_t object, const std::string& name, std::uint32_t value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attribute(H5Acreate2(object, name.c_str(), H5T_STD_U32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  MNDDP_H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_UINT32, &value));
}

void write_u64_attribute(hid_t object, const std::string& name, std::uint64_t value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attribute(H5Acreate2(object, name.c_str(), H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  MNDDP_H5_CHECK(H5Awrite(attribute.get(), H5T_NATIVE_UINT64, &value));
}

}  // namespace ckpt_detail

std::int64_t ArrayData::numel() const { return ckpt_detail::product(shape); }

std::uint32_t crc32_checksum(const void* data, std::size_t bytes) {
  return static_cast<std::uint32_t>(crc32_z(0L, static_cast<const Bytef*>(data), bytes));
}

}  // namespace mnddp
