// CompressedChunks: locating, reading and decoding gzip/shuffle chunks outside HDF5.
#include "compressed_chunks.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "mnddp/h5/raw_reads.hpp"

namespace mnddp {
namespace {

// Undoes HDF5's shuffle filter: the stored chunk holds every element's byte 0, then every byte 1,
// and so on; bytes past the last whole element were left in place. Each element is assembled from
// its planes and written once (byte-strided stores ran at a third of zlib's inflate rate).
static_assert(std::endian::native == std::endian::little, "unshuffle assembles little-endian words");

// Each element's bytes gathered from its planes into an integer (shifts, not byte stores: 4 byte
// stores read back as one word stall store forwarding) and stored once. Little-endian hosts.
template <typename Word>
void unshuffle_elements(const unsigned char* __restrict in, unsigned char* __restrict out, std::size_t elements) {
  constexpr std::size_t kBytes = sizeof(Word);
  for (std::size_t i = 0; i < elements; ++i) {
    Word element = 0;
    for (std::size_t b = 0; b < kBytes; ++b) element |= static_cast<Word>(in[b * elements + i]) << (8 * b);
    std::memcpy(out + i * kBytes, &element, kBytes);
  }
}

#if defined(__SSE2__)
// 4-byte elements (float32, the common case), 16 at a time: bytes interleaved pairwise, then the
// pairs. SSE2 is part of every x86-64 CPU.
void unshuffle_4_bytes(const unsigned char* __restrict in, unsigned char* __restrict out, std::size_t elements) {
  const unsigned char* p0 = in;
  const unsigned char* p1 = in + elements;
  const unsigned char* p2 = in + 2 * elements;
  const unsigned char* p3 = in + 3 * elements;
  std::size_t i = 0;
  for (; i + 16 <= elements; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + i));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p2 + i));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p3 + i));
    const __m128i ab_low = _mm_unpacklo_epi8(a, b), ab_high = _mm_unpackhi_epi8(a, b);
    const __m128i cd_low = _mm_unpacklo_epi8(c, d), cd_high = _mm_unpackhi_epi8(c, d);
    auto* o = reinterpret_cast<__m128i*>(out + 4 * i);
    _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_low, cd_low));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab_low, cd_low));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab_high, cd_high));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab_high, cd_high));
  }
  for (; i < elements; ++i) {
    const std::uint32_t element =
        std::uint32_t{p0[i]} | std::uint32_t{p1[i]} << 8 | std::uint32_t{p2[i]} << 16 | std::uint32_t{p3[i]} << 24;
    std::memcpy(out + 4 * i, &element, 4);
  }
}
#endif

void unshuffle(const unsigned char* in, unsigned char* out, std::size_t bytes, std::size_t element_bytes) {
  const std::size_t elements = bytes / element_bytes;
  switch (element_bytes) {
    case 1:
      std::memcpy(out, in, bytes);
      return;
    case 2:
      unshuffle_elements<std::uint16_t>(in, out, elements);
      break;
    case 4:
#if defined(__SSE2__)
      unshuffle_4_bytes(in, out, elements);
#else
      unshuffle_elements<std::uint32_t>(in, out, elements);
#endif
      break;
    case 8:
      unshuffle_elements<std::uint64_t>(in, out, elements);
      break;
    default:
      for (std::size_t b = 0; b < element_bytes; ++b)
        for (std::size_t i = 0; i < elements; ++i) out[i * element_bytes + b] = in[b * elements + i];
  }
  std::memcpy(out + elements * element_bytes, in + elements * element_bytes, bytes - elements * element_bytes);
}

}  // namespace

std::unique_ptr<CompressedChunks> CompressedChunks::open(hid_t file, hid_t dataset, hid_t memory_type,
                                                         const std::string& path) {
  const std::optional<int> fd = file_descriptor_for_raw_reads(file, dataset, memory_type);
  if (!fd) return nullptr;
  H5Handle dcpl(H5Dget_create_plist(dataset));
  if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return nullptr;
  const int filters = H5Pget_nfilters(dcpl.get());
  if (filters <= 0) return nullptr;  // unfiltered: DirectRows reads those
  std::vector<Filter> pipeline;
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t values = 0;
    unsigned config = 0;
    char name[64];
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &values, nullptr, sizeof(name), name, &config);
    if (id == H5Z_FILTER_DEFLATE)
      pipeline.push_back(Filter::Deflate);
    else if (id == H5Z_FILTER_SHUFFLE)
      pipeline.push_back(Filter::Shuffle);
    else
      return nullptr;  // szip, fletcher32, a plugin: HDF5's pipeline
  }
  if (pipeline.size() > 2) return nullptr;  // decode() has two buffers

  H5Handle space(H5Dget_space(dataset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1) return nullptr;
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), chunk(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank || chunk[0] == 0 ||
      !std::equal(dims.begin() + 1, dims.end(), chunk.begin() + 1))
    return nullptr;  // a row split across chunks

  std::unique_ptr<CompressedChunks> chunks(new CompressedChunks());
  chunks->fd_ = *fd;
  chunks->path_ = path;
  char name[256] = {};
  if (H5Iget_name(dataset, name, sizeof(name)) > 0) chunks->name_ = name[0] == '/' ? name + 1 : name;
  chunks->dataset_ = dataset;
  chunks->element_bytes_ = H5Tget_size(memory_type);
  chunks->row_bytes_ = chunks->element_bytes_;
  for (std::size_t d = 1; d < dims.size(); ++d) chunks->row_bytes_ *= dims[d];
  chunks->rows_per_chunk_ = static_cast<std::int64_t>(chunk[0]);
  chunks->chunk_bytes_ = chunks->row_bytes_ * chunk[0];
  chunks->rank_ = rank;
  chunks->pipeline_ = std::move(pipeline);
  const auto rows = static_cast<std::int64_t>(dims[0]);
  chunks->locations_.resize(static_cast<std::size_t>((rows + chunks->rows_per_chunk_ - 1) / chunks->rows_per_chunk_));
  if (chunks->row_bytes_ == 0 || chunks->locations_.empty()) return nullptr;
  return chunks;
}

bool CompressedChunks::locate(std::size_t chunk) {
  Location& at = locations_.at(chunk);
  if (!at.known) {
    std::lock_guard lock(hdf5_mutex());
    std::vector<hsize_t> coordinates(static_cast<std::size_t>(rank_), 0);
    coordinates[0] = static_cast<hsize_t>(chunk) * static_cast<hsize_t>(rows_per_chunk_);
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dataset_, coordinates.data(), &at.filter_mask, &address, &size) < 0)
      throw UsageError(
          fmt::format("'{}': dataset '{}': cannot locate chunk {}: {}", path_, name_, chunk, h5_take_error()));
    // The chunk index is the file's own claim: a stored extent past the file's end is a damaged or
    // forged file, refused before decode() sizes a buffer from it.
    struct stat file {};
    if (address != HADDR_UNDEF && (fstat(fd_, &file) != 0 || address > static_cast<std::uint64_t>(file.st_size) ||
                                   size > static_cast<std::uint64_t>(file.st_size) - address))
      throw UsageError(
          fmt::format("'{}': dataset '{}' chunk {} claims {} bytes at offset {}, past the file's end: "
                      "corrupt?",
                      path_, name_, chunk, size, address));
    at.allocated = address != HADDR_UNDEF;
    at.address = address;
    at.size = size;
    at.known = true;
  }
  return at.allocated;
}

void CompressedChunks::decode(std::size_t chunk, std::vector<unsigned char>& scratch, unsigned char* out) const {
  const Location& at = locations_.at(chunk);
  // The scratch holds the stored bytes, then room for one decoded stage; it only grows (no zeroing
  // of a megabyte per chunk once it has its size).
  const std::size_t stored = static_cast<std::size_t>(at.size);
  if (scratch.size() < stored + chunk_bytes_) scratch.resize(stored + chunk_bytes_);
  read_exactly(fd_, scratch.data(), stored, at.address, path_);
  unsigned char* middle = scratch.data() + stored;
  // Decoded in reverse pipeline order, each stage from one buffer into the other, ending in `out`.
  std::vector<std::size_t> stages;
  for (std::size_t i = pipeline_.size(); i-- > 0;)
    if ((at.filter_mask & (1u << i)) == 0) stages.push_back(i);
  const unsigned char* data = scratch.data();
  std::size_t bytes = stored;
  if (stages.empty()) {
    if (bytes != chunk_bytes_)
      throw UsageError(fmt::format("'{}': chunk {} holds {} bytes, not {}", path_, chunk, bytes, chunk_bytes_));
    std::memcpy(out, data, bytes);
    return;
  }
  for (std::size_t k = 0; k < stages.size(); ++k) {
    unsigned char* target = k + 1 == stages.size() ? out : middle;
    if (pipeline_[stages[k]] == Filter::Deflate) {
      uLongf inflated = chunk_bytes_;
      const int status = ::uncompress(target, &inflated, data, static_cast<uLong>(bytes));
      if (status != Z_OK || inflated != chunk_bytes_)
        throw UsageError(
            fmt::format("'{}': dataset '{}' chunk {} does not inflate to {} bytes (zlib status {}): corrupt?", path_,
                        name_, chunk, chunk_bytes_, status));
    } else {
      if (bytes != chunk_bytes_)
        throw UsageError(
            fmt::format("'{}': chunk {} holds {} bytes before unshuffling, not {}", path_, chunk, bytes, chunk_bytes_));
      unshuffle(data, target, bytes, element_bytes_);
    }
    data = target;
    bytes = chunk_bytes_;
  }
}

}  // namespace mnddp
