// Serial reading of checkpoint arrays, each verified against its checksum as it is read: XXH3-64
// blocks (format 2) or, in format 1 files, CRC-32. The arrays' bytes are read with pread where the
// file allows it (contiguous, no conversion: what CheckpointWriter writes), through HDF5 otherwise.
#include <fmt/format.h>
#include <hdf5.h>
#include <zlib.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "checkpoint_h5.hpp"
#include "mnddp/check.hpp"
#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"
#include "mnddp/guarded_thread.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "mnddp/h5/raw_reads.hpp"

namespace mnddp {

using namespace ckpt_detail;

namespace {

using ScratchBuffers = CheckpointReader::ScratchBuffers;

enum class ChecksumKind { Xxh3Blocks, Crc32 };

// The checksum of bytes that arrive in pieces, in order: either kind.
class PieceChecksum {
 public:
  explicit PieceChecksum(ChecksumKind kind) : kind_(kind), crc_(crc32_checksum(nullptr, 0)) {}
  void update(const void* data, std::size_t bytes) {
    if (kind_ == ChecksumKind::Xxh3Blocks) {
      xxh3_.update(data, bytes);
    } else {
      crc_ = static_cast<std::uint32_t>(crc32_combine(crc_, crc32_checksum(data, bytes), static_cast<z_off_t>(bytes)));
    }
  }
  std::uint64_t finish() { return kind_ == ChecksumKind::Xxh3Blocks ? xxh3_.finish() : crc_; }

 private:
  ChecksumKind kind_;
  StreamingArrayChecksum xxh3_;
  std::uint32_t crc_;
};

// One long-lived thread that checksums a piece while the caller reads the next (a thread per piece
// cost more than it hid). One piece at a time: start() after wait().
class ChecksumWorker {
 public:
  ChecksumWorker() = default;
  ChecksumWorker(const ChecksumWorker&) = delete;
  ChecksumWorker& operator=(const ChecksumWorker&) = delete;
  ~ChecksumWorker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void start(PieceChecksum& checksum, const std::uint8_t* data, std::size_t bytes) {
    if (!thread_.joinable()) thread_ = guarded_thread("checkpoint checksum", [this] { run(); });
    {
      std::lock_guard lock(mutex_);
      job_ = Job{&checksum, data, bytes};
    }
    wake_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !job_; });
  }

 private:
  struct Job {
    PieceChecksum* checksum;
    const std::uint8_t* data;
    std::size_t bytes;
  };
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || job_; });
      if (!job_) return;  // stopped with nothing left
      const Job job = *job_;
      lock.unlock();
      job.checksum->update(job.data, job.bytes);
      lock.lock();
      job_.reset();
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::optional<Job> job_;
  bool stop_ = false;
  std::thread thread_;
};

// Where a dataset's bytes can be read from the file directly: HDF5's descriptor and the offset of a
// contiguous, allocated dataset stored in the memory type.
struct RawLocation {
  int fd;
  std::uint64_t offset;
};

std::optional<RawLocation> raw_location(hid_t file, hid_t dataset, hid_t memory) {
  const std::optional<int> fd = file_descriptor_for_raw_reads(file, dataset, memory);
  const std::optional<std::uint64_t> offset = fd ? contiguous_data_offset(dataset) : std::nullopt;
  if (!offset) return std::nullopt;
  return RawLocation{*fd, *offset};
}

// Reads a whole dataset into `out` (or, when null, through the two `scratch` buffers, keeping nothing) and
// returns the checksum of its bytes. Large arrays go in pieces, each checksummed by `worker` while
// the next is read, so the checksum hides behind the I/O. Direct reads (`raw`) take 512 KB pieces:
// the checksum then reads a piece still in the cache, and only a short last piece of each array is
// exposed (warm reads of one rank at 0.84-0.88 of raw; 0.75-0.80 with 128 KB, 0.76-0.81 with 1 MB,
// 0.76-0.82 with 4 MB). Through HDF5 a piece is an H5Dread of whole rows, 4 MB: 16 MB pieces left a whole 16 MB
// array's checksum exposed (warm reads at 0.52 of raw, 0.65-0.88 with 4 MB), while 1 MB pieces
// spent more on an H5Dread per piece than they hid.
std::uint64_t read_checksummed(hid_t dataset, hid_t memory, const std::vector<hsize_t>& dims, std::size_t element_bytes,
                               std::optional<RawLocation> raw, const std::string& path, std::uint8_t* out,
                               ScratchBuffers& scratch, ChecksumKind kind, ChecksumWorker& worker) {
  const std::size_t piece_bytes = raw ? std::size_t{512} << 10 : std::size_t{4} << 20;
  PieceChecksum checksum(kind);
  hsize_t elements = 1;
  for (auto d : dims) elements *= d;
  const std::size_t total = static_cast<std::size_t>(elements) * element_bytes;
  if (total == 0) return checksum.finish();
  const hsize_t rows = dims.empty() ? 1 : dims[0];
  const std::size_t row_bytes = total / static_cast<std::size_t>(rows);
  // Direct reads cut pieces anywhere; HDF5's take whole rows.
  const std::size_t unit = raw ? 1 : row_bytes;
  const std::size_t units = total / unit;
  const std::size_t piece_units = std::max<std::size_t>(1, piece_bytes / unit);
  if (out == nullptr)
    for (auto& b : scratch) b.resize(std::max(b.size(), std::min(units, piece_units) * unit));

  H5Handle file_space(raw ? H5I_INVALID_HID : H5Dget_space(dataset));
  if (!raw) MNDDP_H5_CHECK(file_space.get());
  bool pending = false;  // the worker holds the piece before
  auto wait_previous = [&] {
    if (pending) worker.wait();
    pending = false;
  };
  for (std::size_t first = 0, piece = 0; first < units; first += piece_units, ++piece) {
    const std::size_t count = std::min(piece_units, units - first);
    const std::size_t bytes = count * unit;
    std::uint8_t* target = out != nullptr ? out + first * unit : scratch[piece % 2].data();
    try {
      if (raw) {
        read_exactly(raw->fd, target, bytes, raw->offset + first * unit, path);
      } else {
        const hsize_t piece_elements = bytes / element_bytes;
        H5Handle memory_space(H5Screate_simple(1, &piece_elements, nullptr));
        if (!dims.empty()) {
          std::vector<hsize_t> start(dims.size(), 0), extent = dims;
          start[0] = first;
          extent[0] = count;
          MNDDP_H5_CHECK(
              H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr));
        }
        if (H5Dread(dataset, memory, dims.empty() ? H5S_ALL : memory_space.get(),
                    dims.empty() ? H5S_ALL : file_space.get(), H5P_DEFAULT, target) < 0)
          throw Error(h5_take_error());
      }
    } catch (...) {
      wait_previous();  // the worker must not outlive the buffer it reads
      throw;
    }
    wait_previous();  // pieces are checksummed in order
    if (first + count == units && piece == 0) {
      checksum.update(target, bytes);  // one piece: no hand-off
    } else {
      worker.start(checksum, target, bytes);
      pending = true;
    }
  }
  wait_previous();
  return checksum.finish();
}

}  // namespace

struct CheckpointReader::Impl {
  H5Handle file;
  ChecksumWorker checksums;
};

CheckpointReader::CheckpointReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  // Readable at all? A file that cannot be opened or read is an I/O problem, not a bad checkpoint.
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw CorruptCheckpoint(fmt::format("cannot open HDF5 file '{}': it is a directory, not a file", path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  char header[8];
  const ssize_t got = fd < 0 ? -1 : ::read(fd, header, sizeof(header));
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  if (fd < 0 && saved == ENOENT) throw UsageError(fmt::format("cannot open HDF5 file '{}': no such file", path));
  if (fd < 0 || got < 0)
    throw UsageError(fmt::format("checkpoint '{}' cannot be read: {}", path, std::strerror(saved)));
  std::lock_guard lock(hdf5_mutex());
  try {
    impl_->file = h5_open_read_only(path);
  } catch (const UsageError& e) {
    throw CorruptCheckpoint(e.what());  // readable, but not a whole HDF5 file
  }
}

CheckpointReader::~CheckpointReader() {
  std::lock_guard lock(hdf5_mutex());
  impl_->file.reset();
}

std::int64_t CheckpointReader::file_id() const {
  static_assert(sizeof(hid_t) == sizeof(std::int64_t));
  return impl_->file.get();
}

bool CheckpointReader::has_attribute(const std::string& name) const {
  std::lock_guard lock(hdf5_mutex());
  return H5Aexists(impl_->file.get(), name.c_str()) > 0;
}

std::string CheckpointReader::attribute(const std::string& name) const {
  std::lock_guard lock(hdf5_mutex());
  if (H5Aexists(impl_->file.get(), name.c_str()) <= 0)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': attribute '{}' is missing", path_, name));
  return read_string_attribute(impl_->file.get(), name);
}

std::vector<std::string> CheckpointReader::attribute_names() const {
  std::lock_guard lock(hdf5_mutex());
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  if (H5Aiterate2(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names) < 0)
    throw CorruptCheckpoint(
        fmt::format("checkpoint '{}': its attributes cannot be listed: {}", path_, h5_take_error()));
  return names;
}

bool CheckpointReader::has_array(const std::string& path) const {
  std::lock_guard lock(hdf5_mutex());
  return H5Lexists(impl_->file.get(), path.c_str(), H5P_DEFAULT) > 0 &&
         H5Oexists_by_name(impl_->file.get(), path.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> CheckpointReader::list(const std::string& group) const {
  std::lock_guard lock(hdf5_mutex());
  std::vector<std::string> names;
  if (H5Lexists(impl_->file.get(), group.c_str(), H5P_DEFAULT) <= 0) return names;
  H5Handle handle(H5Gopen2(impl_->file.get(), group.c_str(), H5P_DEFAULT));
  MNDDP_H5_CHECK(handle.get());
  auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  MNDDP_H5_CHECK(H5Literate(handle.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names));
  std::sort(names.begin(), names.end());
  return names;
}

ArrayData CheckpointReader::read(const std::string& path) const {
  ArrayData out;
  read_array(path, &out, nullptr);
  return out;
}

void CheckpointReader::read_array(const std::string& path, ArrayData* out, ScratchBuffers* scratch) const {
  std::lock_guard lock(hdf5_mutex());
  const OpenArray array = open_array(impl_->file.get(), path_, path, /*missing_is_corrupt=*/false);
  const H5Handle& dataset = array.dataset;
  const DType dtype = array.dtype;
  const std::vector<hsize_t>& dims = array.dims;
  std::uint8_t* destination = nullptr;
  if (out != nullptr) {
    out->dtype = dtype;
    out->shape.assign(dims.begin(), dims.end());
    out->bytes.resize(static_cast<std::size_t>(out->numel()) * dtype_size(dtype));
    destination = out->bytes.data();
  }
  // Format 2 stores xxh3_64, format 1 crc32: the attribute says which to compute.
  const bool xxh3 = H5Aexists(dataset.get(), "xxh3_64") > 0;
  if (!xxh3 && H5Aexists(dataset.get(), "crc32") <= 0)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' has no checksum", path_, path));
  std::uint64_t actual = 0;
  try {
    ScratchBuffers none;
    const hid_t memory = memory_type(dtype);
    actual = read_checksummed(dataset.get(), memory, dims, dtype_size(dtype),
                              raw_location(impl_->file.get(), dataset.get(), memory), path_, destination,
                              scratch != nullptr ? *scratch : none,
                              xxh3 ? ChecksumKind::Xxh3Blocks : ChecksumKind::Crc32, impl_->checksums);
  } catch (const Error& e) {
    throw UsageError(fmt::format("checkpoint '{}': array '{}' cannot be read: {}", path_, path, e.what()));
  }
  std::uint64_t stored = 0;
  H5Handle attribute(H5Aopen(dataset.get(), xxh3 ? "xxh3_64" : "crc32", H5P_DEFAULT));
  if (!attribute || H5Aread(attribute.get(), H5T_NATIVE_UINT64, &stored) < 0)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' has no checksum", path_, path));
  if (actual != stored)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}': array '{}' is corrupt ({} {:0{}x}, expected {:0{}x})", path_,
                                        path, xxh3 ? "XXH3-64" : "CRC-32", actual, xxh3 ? 16 : 8, stored,
                                        xxh3 ? 16 : 8));
}

std::vector<std::string> CheckpointReader::datasets() const {
  std::vector<std::string> names;
  std::lock_guard lock(hdf5_mutex());
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* out) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  if (H5Ovisit(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC, visit, &names) < 0)
    throw CorruptCheckpoint(fmt::format("checkpoint '{}' cannot be walked: {}", path_, h5_take_error()));
  return names;
}

void CheckpointReader::verify_all() const {
  const std::vector<std::string> datasets = this->datasets();
  ScratchBuffers scratch;  // reused by every array: no fresh pages to fault in per array
  for (const auto& name : datasets) read_array(name, nullptr, &scratch);  // streamed: checked, not kept
}

}  // namespace mnddp
