// .npy input for `mnddp-data convert`: the header dict parsed by hand (format 1.0/2.0/3.0), x read
// in blocks straight from the file (no whole-file copy), labels loaded and widened to int64.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>

#include "mnddp/error.hpp"
#include "sources.hpp"

namespace mnddp::tools {
namespace {

struct NpyHeader {
  char kind = 0;  // 'u', 'i', 'f', ...
  std::size_t element_bytes = 0;
  bool needs_swap = false;  // stored in the other byte order than this host's
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;
  std::string descr;
};

[[noreturn]] void bad_npy(const std::string& path, const std::string& why) {
  throw UsageError(fmt::format("'{}': {}", path, why));
}

std::uint64_t little_endian_value(const unsigned char* bytes, std::size_t count) {
  std::uint64_t value = 0;
  for (std::size_t i = count; i-- > 0;) value = value << 8 | bytes[i];
  return value;
}

NpyHeader read_header(std::ifstream& in, const std::string& path) {
  unsigned char prefix[12] = {};
  in.read(reinterpret_cast<char*>(prefix), 10);
  if (in.gcount() != 10 || std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    bad_npy(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = prefix[6];
  if (major < 1 || major > 3) bad_npy(path, fmt::format("unsupported .npy format version {}.{}", major, prefix[7]));
  std::size_t length_bytes = 2;
  if (major >= 2) {
    in.read(reinterpret_cast<char*>(prefix + 10), 2);
    length_bytes = 4;
  }
  const std::uint64_t header_length = little_endian_value(prefix + 8, length_bytes);
  std::string dict(header_length, '\0');
  in.read(dict.data(), static_cast<std::streamsize>(header_length));
  if (static_cast<std::uint64_t>(in.gcount()) != header_length) bad_npy(path, "truncated .npy header");

  NpyHeader header;
  header.data_offset = 8 + length_bytes + header_length;
  std::smatch match;
  if (!std::regex_search(dict, match, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    bad_npy(path, "structured or unreadable dtype in the .npy header (need a plain numeric array)");
  header.descr = match[1];
  if (std::regex_search(dict, match, std::regex(R"('fortran_order'\s*:\s*True)")))
    bad_npy(path, "array is in Fortran order; save it with numpy.ascontiguousarray first");
  if (!std::regex_search(dict, match, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    bad_npy(path, "no shape in the .npy header");
  const std::string dims = match[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it)
    header.shape.push_back(std::stoll(it->str()));

  const std::string& d = header.descr;
  std::size_t digits = 0;
  if (d.size() >= 3 && std::string("<>|=").find(d[0]) != std::string::npos) {
    const bool little = std::endian::native == std::endian::little;
    header.needs_swap = (d[0] == '>' && little) || (d[0] == '<' && !little);
    header.kind = d[1];
    digits = 2;
  }
  if (digits == 0 || std::from_chars(d.data() + digits, d.data() + d.size(), header.element_bytes).ec != std::errc())
    bad_npy(path, fmt::format("unsupported dtype '{}'", d));
  return header;
}

std::optional<SampleType> input_type(const NpyHeader& h) {
  if (h.kind == 'u' && h.element_bytes == 1) return SampleType::U8;
  if (h.kind == 'u' && h.element_bytes == 2) return SampleType::U16;
  if (h.kind == 'u' && h.element_bytes == 4) return SampleType::U32;
  if (h.kind == 'u' && h.element_bytes == 8) return SampleType::U64;
  if (h.kind == 'i' && h.element_bytes == 1) return SampleType::I8;
  if (h.kind == 'i' && h.element_bytes == 2) return SampleType::I16;
  if (h.kind == 'i' && h.element_bytes == 4) return SampleType::I32;
  if (h.kind == 'i' && h.element_bytes == 8) return SampleType::I64;
  if (h.kind == 'f' && h.element_bytes == 2) return SampleType::F16;
  if (h.kind == 'f' && h.element_bytes == 4) return SampleType::F32;
  if (h.kind == 'f' && h.element_bytes == 8) return SampleType::F64;
  return std::nullopt;
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (const auto d : shape) count *= d;
  return count;
}

void check_data_size(const std::string& path, const NpyHeader& header) {
  const auto expected =
      header.data_offset + static_cast<std::uint64_t>(element_count(header.shape)) * header.element_bytes;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error || size != expected)
    bad_npy(path, fmt::format("holds {} bytes but its header ({} {}) needs {}: truncated or corrupt", size,
                              header.descr, fmt::format("[{}]", fmt::join(header.shape, ", ")), expected));
}

template <typename T>
T load(const unsigned char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

// One integer label (native byte order by now) as int64.
std::int64_t widen_label(const unsigned char* bytes, const NpyHeader& header, const std::string& path,
                         std::size_t position) {
  const bool is_signed = header.kind == 'i';
  switch (header.element_bytes) {
    case 1:
      return is_signed ? load<std::int8_t>(bytes) : load<std::uint8_t>(bytes);
    case 2:
      return is_signed ? load<std::int16_t>(bytes) : load<std::uint16_t>(bytes);
    case 4:
      return is_signed ? load<std::int32_t>(bytes) : load<std::uint32_t>(bytes);
    case 8: {
      if (is_signed) return load<std::int64_t>(bytes);
      const auto value = load<std::uint64_t>(bytes);
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        bad_npy(path, fmt::format("label {} at position {} does not fit in int64", value, position));
      return static_cast<std::int64_t>(value);
    }
    default:
      bad_npy(path, fmt::format("labels of dtype '{}' are not supported", header.descr));
  }
}

// Integer labels of any width and byte order, widened to int64.
std::vector<std::int64_t> read_labels(const std::string& path, std::int64_t expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_npy(path, "cannot be opened");
  const NpyHeader header = read_header(in, path);
  const bool column = header.shape.size() == 2 && header.shape[1] == 1;
  if ((header.kind != 'i' && header.kind != 'u') || (header.shape.size() != 1 && !column))
    bad_npy(path, fmt::format("labels must be a 1-D integer array, found dtype '{}' with shape [{}]", header.descr,
                              fmt::join(header.shape, ", ")));
  if (header.shape[0] != expected)
    bad_npy(path, fmt::format("has {} labels but the inputs have {} samples", header.shape[0], expected));
  check_data_size(path, header);
  std::vector<unsigned char> raw(static_cast<std::size_t>(expected) * header.element_bytes);
  in.seekg(static_cast<std::streamoff>(header.data_offset));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (header.needs_swap) swap_bytes(raw.data(), static_cast<std::size_t>(expected), header.element_bytes);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(expected));
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = widen_label(raw.data() + i * header.element_bytes, header, path, i);
  return labels;
}

class NpySource : public SampleSource {
 public:
  NpySource(const std::string& x_path, const std::string& y_path) : path_(x_path), in_(x_path, std::ios::binary) {
    if (!in_) bad_npy(x_path, "cannot be opened");
    header_ = read_header(in_, x_path);
    const auto type = input_type(header_);
    if (!type)
      bad_npy(x_path, fmt::format("inputs of dtype '{}' are not supported (use uint8, int8/16/32/64 or "
                                  "float16/32/64)",
                                  header_.descr));
    if (header_.shape.size() < 2)
      bad_npy(x_path, fmt::format("inputs have shape [{}]; they need at least 2 dimensions [samples, ...]",
                                  fmt::join(header_.shape, ", ")));
    check_data_size(x_path, header_);
    x_type = *type;
    num_samples = header_.shape[0];
    sample_shape.assign(header_.shape.begin() + 1, header_.shape.end());
    row_bytes_ = static_cast<std::size_t>(element_count(sample_shape)) * header_.element_bytes;
    labels = read_labels(y_path, num_samples);
    description = fmt::format("'{}' ({}) + '{}'", x_path, header_.descr, y_path);
  }

  void read(std::int64_t first, std::int64_t rows, void* x) override {
    in_.seekg(static_cast<std::streamoff>(header_.data_offset + static_cast<std::uint64_t>(first) * row_bytes_));
    const auto bytes = static_cast<std::streamsize>(static_cast<std::size_t>(rows) * row_bytes_);
    in_.read(static_cast<char*>(x), bytes);
    if (in_.gcount() != bytes) bad_npy(path_, "read past the end of the file (truncated while converting?)");
    if (header_.needs_swap && header_.element_bytes > 1)
      swap_bytes(x, static_cast<std::size_t>(bytes) / header_.element_bytes, header_.element_bytes);
  }

 private:
  std::string path_;
  std::ifstream in_;
  NpyHeader header_;
  std::size_t row_bytes_ = 0;
};

}  // namespace

std::unique_ptr<SampleSource> open_npy_source(const std::string& x_path, const std::string& y_path) {
  return std::make_unique<NpySource>(x_path, y_path);
}

}  // namespace mnddp::tools
