// Reading parts of checkpoint arrays: a rank's share of an array (ZeRO's optimizer state, read by
// each rank for itself) and a rank's share of an array's checksum blocks (parallel verification).
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>

#include "checkpoint_h5.hpp"
#include "mnddp/check.hpp"
#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

using namespace ckpt_detail;

ArrayData CheckpointReader::read_share(const std::string& path, std::int64_t first, std::int64_t count,
                                       std::vector<std::int64_t>* whole_shape) const {
  std::lock_guard lock(hdf5_mutex());
  const OpenArray array = open_array(file_id(), path_, path, /*missing_is_corrupt=*/false);
  ArrayData out;
  out.dtype = array.dtype;
  const std::vector<std::int64_t> shape = array.shape();
  if (whole_shape != nullptr) *whole_shape = shape;
  if (first < 0 || count < 0 || first + count > product(shape))
    throw UsageError(fmt::format("checkpoint '{}': array '{}' has {} values, not [{}, {})", path_, path, product(shape),
                                 first, first + count));
  out.shape = {count};
  out.bytes.resize(static_cast<std::size_t>(count) * dtype_size(out.dtype));
  if (count == 0) return out;
  const auto elements = static_cast<hsize_t>(count);
  H5Handle memory_space(H5Screate_simple(1, &elements, nullptr));
  select_flat_range(array.space.get(), shape, first, count);
  if (H5Dread(array.dataset.get(), memory_type(out.dtype), memory_space.get(), array.space.get(), H5P_DEFAULT,
              out.bytes.data()) < 0)
    throw UsageError(fmt::format("checkpoint '{}': array '{}' cannot be read: {}", path_, path, h5_take_error()));
  return out;
}

CheckpointReader::BlockHashes CheckpointReader::hash_blocks(const std::string& path, std::size_t share,
                                                            std::size_t shares) const {
  std::lock_guard lock(hdf5_mutex());
  const OpenArray array = open_array(file_id(), path_, path, /*missing_is_corrupt=*/true);
  const H5Handle& dataset = array.dataset;
  const DType dtype = array.dtype;
  BlockHashes out;
  H5Handle attribute(H5Aexists(dataset.get(), "xxh3_64") > 0 ? H5Aopen(dataset.get(), "xxh3_64", H5P_DEFAULT)
                                                             : H5I_INVALID_HID);
  if (!attribute || H5Aread(attribute.get(), H5T_NATIVE_UINT64, &out.stored) < 0)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' has no XXH3-64 checksum", path_, path));
  const std::vector<std::int64_t> shape = array.shape();
  const hid_t space = array.space.get();
  const std::size_t element = dtype_size(dtype);
  const std::size_t bytes = static_cast<std::size_t>(product(shape)) * element;
  out.blocks = checksum_block_count(bytes);
  const auto [first, last] = checksum_blocks_share(out.blocks, share, shares);
  if (first == last) return out;
  const auto begin = static_cast<std::int64_t>(first * kChecksumBlockBytes / element);
  const auto end = static_cast<std::int64_t>(std::min(bytes, last * kChecksumBlockBytes) / element);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(end - begin) * element);
  const auto elements = static_cast<hsize_t>(end - begin);
  H5Handle memory_space(H5Screate_simple(1, &elements, nullptr));
  if (shape.empty()) {
    MNDDP_H5_CHECK(H5Sselect_all(space));
  } else {
    select_flat_range(space, shape, begin, end - begin);
  }
  if (H5Dread(dataset.get(), memory_type(dtype), memory_space.get(), space, H5P_DEFAULT, data.data()) < 0)
    throw UsageError(fmt::format("checkpoint '{}': array '{}' cannot be read: {}", path_, path, h5_take_error()));
  for (std::size_t offset = 0; offset < data.size(); offset += kChecksumBlockBytes)
    out.mine.push_back(block_hash(data.data() + offset, std::min(kChecksumBlockBytes, data.size() - offset)));
  return out;
}

}  // namespace mnddp
