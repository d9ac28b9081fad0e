// The HDF5 side of checkpoint files: types, attributes, checksums.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <limits>
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

namespace {

// The boxes of elements [first, last) of the sub-array at `dim` whose leading indices are `prefix`.
void add_boxes(hid_t space, const std::vector<std::int64_t>& shape, std::vector<hsize_t>& prefix, std::int64_t first,
               std::int64_t last, bool& any) {
  if (first >= last) return;
  const std::size_t dim = prefix.size();
  const std::int64_t row = product(std::vector<std::int64_t>(shape.begin() + static_cast<std::ptrdiff_t>(dim) + 1,
                                                             shape.end()));  // elements per index of `dim`
  auto box = [&](std::int64_t from_index, std::int64_t indices) {
    std::vector<hsize_t> start = prefix, count(prefix.size(), 1);
    start.push_back(static_cast<hsize_t>(from_index));
    count.push_back(static_cast<hsize_t>(indices));
    for (std::size_t d = dim + 1; d < shape.size(); ++d) {
      start.push_back(0);
      count.push_back(static_cast<hsize_t>(shape[d]));
    }
    MNDDP_H5_CHECK(
        H5Sselect_hyperslab(space, any ? H5S_SELECT_OR : H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
    any = true;
  };
  auto partial = [&](std::int64_t index, std::int64_t from, std::int64_t to) {
    prefix.push_back(static_cast<hsize_t>(index));
    add_boxes(space, shape, prefix, from, to, any);
    prefix.pop_back();
  };
  if (first % row != 0) {  // a head: the end of one row
    const std::int64_t index = first / row;
    const std::int64_t head_end = std::min(last, (index + 1) * row);
    partial(index, first - index * row, head_end - index * row);
    first = head_end;
  }
  if (first >= last) return;
  if (last / row > first / row) box(first / row, last / row - first / row);  // whole rows
  if (last % row != 0) partial(last / row, 0, last - (last / row) * row);    // a tail: a row's start
}

}  // namespace

void select_flat_range(hid_t space, const std::vector<std::int64_t>& shape, std::int64_t first, std::int64_t count) {
  if (count == 0 || shape.empty()) {
    if (count == 0) MNDDP_H5_CHECK(H5Sselect_none(space));
    return;  // a scalar: the whole (one-element) space
  }
  std::vector<hsize_t> prefix;
  bool any = false;
  add_boxes(space, shape, prefix, first, first + count, any);
}

namespace {

// What a crafted file can claim beyond its bytes, refused before a read sizes anything from it: an
// element type wider than the dtype (HDF5 1.10 then allocates a conversion buffer of one element, 2 GB
// for a 2 GB integer type), or a contiguous array's shape larger than its stored bytes (mnddp writes
// every array contiguous and allocated, so the two agree in a file it wrote).
void check_stored_size(const OpenArray& out, const std::string& file_path, const std::string& array) {
  H5Handle type(H5Dget_type(out.dataset.get()));
  MNDDP_H5_CHECK(type.get());
  const std::size_t element = H5Tget_size(type.get());
  if (element != dtype_size(out.dtype))
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' stores {}-byte elements, but its dtype {} has {}",
                                        file_path, array, element, dtype_name(out.dtype), dtype_size(out.dtype)));
  hsize_t bytes = element;
  for (const hsize_t d : out.dims) {
    if (d != 0 && bytes > std::numeric_limits<hsize_t>::max() / d)
      throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' has a shape too large to address: {}", file_path,
                                          array, fmt::join(out.dims, " x ")));
    bytes *= d;
  }
  // Chunked arrays (another writer's, compressed) hold what their filters make of the shape.
  H5Handle create(H5Dget_create_plist(out.dataset.get()));
  MNDDP_H5_CHECK(create.get());
  if (H5Pget_layout(create.get()) != H5D_CONTIGUOUS) return;
  const hsize_t stored = H5Dget_storage_size(out.dataset.get());
  if (stored != bytes)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' holds {} bytes, but its shape ({}) needs {}",
                                        file_path, array, stored, fmt::join(out.dims, " x "), bytes));
}

}  // namespace

OpenArray open_array(hid_t file, const std::string& file_path, const std::string& array, bool missing_is_corrupt) {
  OpenArray out;
  out.dataset = H5Handle(H5Dopen2(file, array.c_str(), H5P_DEFAULT));
  if (!out.dataset) {
    const std::string what = fmt::format("checkpoint '{}': array '{}' is missing", file_path, array);
    if (missing_is_corrupt) throw CorruptCheckpoint(what);
    throw UsageError(what);
  }
  try {
    out.dtype = dtype_from_name(read_string_attribute(out.dataset.get(), "dtype"), file_path + ":" + array);
  } catch (const Error& e) {
    throw CorruptCheckpoint(
        fmt::format("checkpoint '{}': array '{}' has no valid dtype: {}", file_path, array, e.what()));
  }
  out.space = H5Handle(H5Dget_space(out.dataset.get()));
  const int rank_count = H5Sget_simple_extent_ndims(out.space.get());
  MNDDP_H5_CHECK(rank_count);
  out.dims.resize(static_cast<std::size_t>(rank_count));
  if (rank_count > 0) MNDDP_H5_CHECK(H5Sget_simple_extent_dims(out.space.get(), out.dims.data(), nullptr));
  check_stored_size(out, file_path, array);
  return out;
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
