// MNIST IDX and CIFAR-10 binary inputs for `mnddp-data convert`, loaded whole (tens to hundreds of
// MB at most), plus the helpers every source shares.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>

#include "mnddp/error.hpp"
#include "sources.hpp"

namespace mnddp::tools {
namespace {

constexpr std::size_t kCifarImageBytes = 3 * 32 * 32;
constexpr std::size_t kCifarRecordBytes = 1 + kCifarImageBytes;
constexpr int kCifarClasses = 10;

struct IdxArray {
  SampleType type = SampleType::U8;
  std::vector<std::int64_t> dims;
  std::vector<unsigned char> data;  // native byte order
};

// IDX: two zero bytes, an element type code, the number of dimensions, each dimension as a
// big-endian uint32, then the big-endian elements.
IdxArray read_idx(const std::string& path) {
  std::vector<unsigned char> bytes = read_whole_file(path);
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b)
    throw UsageError(fmt::format("'{}' is gzip-compressed; gunzip it first", path));
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    throw UsageError(fmt::format("'{}' is not an IDX file (bad magic number)", path));
  IdxArray array;
  switch (bytes[2]) {
    case 0x08:
      array.type = SampleType::U8;
      break;
    case 0x09:
      array.type = SampleType::I8;
      break;
    case 0x0B:
      array.type = SampleType::I16;
      break;
    case 0x0C:
      array.type = SampleType::I32;
      break;
    case 0x0D:
      array.type = SampleType::F32;
      break;
    case 0x0E:
      array.type = SampleType::F64;
      break;
    default:
      throw UsageError(fmt::format("'{}': unknown IDX element type code 0x{:02x}", path, bytes[2]));
  }
  const std::size_t rank = bytes[3];
  const std::size_t header = 4 + 4 * rank;
  if (rank == 0 || bytes.size() < header)
    throw UsageError(fmt::format("'{}': IDX header with {} dimensions is truncated", path, rank));
  std::size_t count = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    const unsigned char* p = bytes.data() + 4 + 4 * d;
    array.dims.push_back(std::int64_t{p[0]} << 24 | std::int64_t{p[1]} << 16 | std::int64_t{p[2]} << 8 | p[3]);
    count *= static_cast<std::size_t>(array.dims.back());
  }
  const std::size_t element = sample_type_size(array.type);
  if (bytes.size() != header + count * element)
    throw UsageError(fmt::format("'{}' holds {} bytes but its IDX header ([{}] of {}) needs {}: truncated or corrupt",
                                 path, bytes.size(), fmt::join(array.dims, ", "), sample_type_name(array.type),
                                 header + count * element));
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  if (std::endian::native == std::endian::little) swap_bytes(array.data.data(), count, element);
  return array;
}

template <typename T>
std::int64_t load_as_int64(const unsigned char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);
  return static_cast<std::int64_t>(value);
}

}  // namespace

void MemorySource::read(std::int64_t first, std::int64_t rows, void* x) {
  std::size_t row_bytes = sample_type_size(x_type);
  for (const auto d : sample_shape) row_bytes *= static_cast<std::size_t>(d);
  std::memcpy(x, data.data() + static_cast<std::size_t>(first) * row_bytes, static_cast<std::size_t>(rows) * row_bytes);
}

void swap_bytes(void* data, std::size_t count, std::size_t size) {
  if (size < 2) return;
  auto* bytes = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) std::reverse(bytes + i * size, bytes + (i + 1) * size);
}

std::vector<unsigned char> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot open '{}' (no such file, or no permission)", path));
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw UsageError(fmt::format("cannot read '{}'", path));
  return bytes;
}

std::unique_ptr<SampleSource> open_idx_source(const std::string& images_path, const std::string& labels_path) {
  IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.dims.size() < 2)
    throw UsageError(
        fmt::format("'{}' holds a 1-D IDX array; --images needs [samples, rows, cols] (is it the "
                    "labels file?)",
                    images_path));
  if (labels.dims.size() != 1 || is_float_type(labels.type))
    throw UsageError(fmt::format("'{}': --labels needs a 1-D integer IDX array, found {} [{}]", labels_path,
                                 sample_type_name(labels.type), fmt::join(labels.dims, ", ")));
  if (labels.dims[0] != images.dims[0])
    throw UsageError(fmt::format("'{}' has {} labels but '{}' has {} images", labels_path, labels.dims[0], images_path,
                                 images.dims[0]));
  auto source = std::make_unique<MemorySource>();
  source->x_type = images.type;
  source->num_samples = images.dims[0];
  source->sample_shape.assign(images.dims.begin() + 1, images.dims.end());
  source->data = std::move(images.data);
  const std::size_t element = sample_type_size(labels.type);
  for (std::int64_t i = 0; i < labels.dims[0]; ++i) {
    const unsigned char* p = labels.data.data() + static_cast<std::size_t>(i) * element;
    switch (labels.type) {
      case SampleType::U8:
        source->labels.push_back(load_as_int64<std::uint8_t>(p));
        break;
      case SampleType::I8:
        source->labels.push_back(load_as_int64<std::int8_t>(p));
        break;
      case SampleType::I16:
        source->labels.push_back(load_as_int64<std::int16_t>(p));
        break;
      default:
        source->labels.push_back(load_as_int64<std::int32_t>(p));
        break;
    }
  }
  source->description = fmt::format("IDX '{}' + '{}'", images_path, labels_path);
  return source;
}

std::unique_ptr<SampleSource> open_cifar10_source(const std::vector<std::string>& paths) {
  if (paths.empty()) throw UsageError("--cifar10: no batch files given");
  auto source = std::make_unique<MemorySource>();
  source->x_type = SampleType::U8;
  source->sample_shape = {3, 32, 32};
  for (const auto& path : paths) {
    const std::vector<unsigned char> bytes = read_whole_file(path);
    if (bytes.empty() || bytes.size() % kCifarRecordBytes != 0)
      throw UsageError(
          fmt::format("'{}' holds {} bytes, not a whole number of {}-byte CIFAR-10 records (1 label "
                      "byte + 3072 image bytes)",
                      path, bytes.size(), kCifarRecordBytes));
    for (std::size_t r = 0; r < bytes.size() / kCifarRecordBytes; ++r) {
      const unsigned char* record = bytes.data() + r * kCifarRecordBytes;
      if (record[0] >= kCifarClasses)
        throw UsageError(fmt::format("'{}' record {}: label byte {} is not a CIFAR-10 class 0-9 (a CIFAR-100 file?)",
                                     path, r, record[0]));
      source->labels.push_back(record[0]);
      source->data.insert(source->data.end(), record + 1, record + kCifarRecordBytes);
    }
  }
  source->num_samples = static_cast<std::int64_t>(source->labels.size());
  source->description = fmt::format("CIFAR-10 binary {}", fmt::join(paths, ", "));
  return source;
}

}  // namespace mnddp::tools
