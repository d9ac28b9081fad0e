// Parallel-HDF5 writing and serial reading of checkpoint arrays, with a CRC-32 per array.
#include "mnddp/ckpt/checkpoint_file.hpp"

#include <fmt/format.h>
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>

#include "mnddp/check.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {
namespace {

// Half-precision arrays are stored as uint16 with a "dtype" attribute saying which kind: HDF5 1.10
// has no bfloat16, and h5py users view the raw bits (np.uint16 -> float16 / bfloat16) themselves.
hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return H5T_IEEE_F32LE;
    case DType::F64:
      return H5T_IEEE_F64LE;
    case DType::F16:
      return H5T_STD_U16LE;
    case DType::BF16:
      return H5T_STD_U16LE;
    case DType::I32:
      return H5T_STD_I32LE;
    case DType::I64:
      return H5T_STD_I64LE;
    case DType::U8:
      return H5T_STD_U8LE;
  }
  throw std::logic_error("file_type: unknown dtype");
}

hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return H5T_NATIVE_FLOAT;
    case DType::F64:
      return H5T_NATIVE_DOUBLE;
    case DType::F16:
      return H5T_NATIVE_UINT16;
    case DType::BF16:
      return H5T_NATIVE_UINT16;
    case DType::I32:
      return H5T_NATIVE_INT32;
    case DType::I64:
      return H5T_NATIVE_INT64;
    case DType::U8:
      return H5T_NATIVE_UINT8;
  }
  throw std::logic_error("memory_type: unknown dtype");
}

DType dtype_from_name(const std::string& name, const std::string& where) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    if (name == dtype_name(d)) return d;
  throw UsageError(fmt::format("{}: unknown array dtype '{}'", where, name));
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

H5Handle string_type(std::size_t length) {
  H5Handle type(H5Tcopy(H5T_C_S1));
  MNDDP_H5_CHECK(type.get());
  MNDDP_H5_CHECK(H5Tset_size(type.get(), std::max<std::size_t>(1, length)));
  MNDDP_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  return type;
}

// Writes a string attribute on `object` (collective in parallel HDF5: same value everywhere).
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

// One rank's share of an array when writing: whole rows of the first dimension.
struct Slab {
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
  std::size_t offset = 0;  // bytes into the array
  std::size_t bytes = 0;
};

using ScratchBuffers = CheckpointReader::ScratchBuffers;

// Rank r's share of an array: rows [r*n/W, (r+1)*n/W) of the first dimension (a scalar: rank 0).
Slab slab_of(const ArrayView& array, int rank, int size) {
  const std::size_t element_bytes = dtype_size(array.dtype);
  if (array.shape.empty()) return rank == 0 ? Slab{0, 1, 0, element_bytes} : Slab{};
  const std::int64_t rows = array.shape[0];
  const std::int64_t row_elements = rows == 0 ? 0 : product(array.shape) / rows;
  Slab slab;
  slab.first_row = rows * rank / size;
  slab.rows = rows * (rank + 1) / size - slab.first_row;
  const std::size_t row_bytes = static_cast<std::size_t>(row_elements) * element_bytes;
  slab.offset = static_cast<std::size_t>(slab.first_row) * row_bytes;
  slab.bytes = static_cast<std::size_t>(slab.rows) * row_bytes;
  return slab;
}

// Reads a whole dataset into `out` (or, when null, through the two `scratch` buffers, keeping nothing) and
// returns the CRC-32 of its bytes. Large arrays go in pieces of whole rows, each piece checksummed
// on a worker while the next is read, so the checksum hides behind the I/O.
std::uint32_t read_checksummed(hid_t dataset, hid_t memory, const std::vector<hsize_t>& dims, std::size_t element_bytes,
                               std::uint8_t* out, ScratchBuffers& scratch) {
  constexpr std::size_t kPieceBytes = 16u << 20;
  hsize_t elements = 1;
  for (auto d : dims) elements *= d;
  const std::size_t total = static_cast<std::size_t>(elements) * element_bytes;
  if (total == 0) return checksum(nullptr, 0);
  const hsize_t rows = dims.empty() ? 1 : dims[0];
  const std::size_t row_bytes = total / static_cast<std::size_t>(rows);
  const hsize_t piece_rows = std::max<hsize_t>(1, kPieceBytes / row_bytes);
  if (out == nullptr)
    for (auto& b : scratch)
      b.resize(std::max(b.size(), static_cast<std::size_t>(std::min(rows, piece_rows)) * row_bytes));

  H5Handle file_space(H5Dget_space(dataset));
  MNDDP_H5_CHECK(file_space.get());
  std::uint32_t crc = checksum(nullptr, 0);
  std::future<std::uint32_t> previous;
  std::size_t previous_bytes = 0;
  auto fold_previous = [&] {
    if (previous.valid())
      crc = static_cast<std::uint32_t>(crc32_combine(crc, previous.get(), static_cast<z_off_t>(previous_bytes)));
  };
  for (hsize_t first = 0, piece = 0; first < rows; first += piece_rows, ++piece) {
    const hsize_t count = std::min(piece_rows, rows - first);
    const std::size_t bytes = static_cast<std::size_t>(count) * row_bytes;
    std::uint8_t* target =
        out != nullptr ? out + static_cast<std::size_t>(first) * row_bytes : scratch[piece % 2].data();
    const hsize_t piece_elements = bytes / element_bytes;
    H5Handle memory_space(H5Screate_simple(1, &piece_elements, nullptr));
    if (!dims.empty()) {
      std::vector<hsize_t> start(dims.size(), 0), extent = dims;
      start[0] = first;
      extent[0] = count;
      MNDDP_H5_CHECK(
          H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr));
    }
    if (H5Dread(dataset, memory, dims.empty() ? H5S_ALL : memory_space.get(), dims.empty() ? H5S_ALL : file_space.get(),
                H5P_DEFAULT, target) < 0) {
      fold_previous();  // the worker must not outlive the buffer it reads
      throw Error(h5_take_error());
    }
    fold_previous();
    previous = std::async(std::launch::async, [target, bytes] { return checksum(target, bytes); });
    previous_bytes = bytes;
  }
  fold_previous();
  return crc;
}

}  // namespace

std::int64_t ArrayData::numel() const { return product(shape); }

std::uint32_t checksum(const void* data, std::size_t bytes) {
  return static_cast<std::uint32_t>(crc32_z(0L, static_cast<const Bytef*>(data), bytes));
}

// --- writer ----------------------------------------------------------------------------------------

struct ParallelCheckpointWriter::Impl {
  Communicator* comm = nullptr;
  std::string path;
  int rank = 0;
  int size = 1;
  H5Handle file;
  H5Handle transfer;     // collective data transfer
  H5Handle link_create;  // creates intermediate groups
  H5Handle dataset_create;
};

ParallelCheckpointWriter::ParallelCheckpointWriter(Communicator& agreement, MPI_Comm comm, const std::string& path)
    : impl_(std::make_unique<Impl>()) {
  std::lock_guard lock(hdf5_mutex());
  impl_->comm = &agreement;
  impl_->path = path;
  MNDDP_MPI_CHECK(MPI_Comm_rank(comm, &impl_->rank));
  MNDDP_MPI_CHECK(MPI_Comm_size(comm, &impl_->size));
  H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
  MNDDP_H5_CHECK(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL));
  // Metadata is read and written collectively: one rank touches the file system for it, not N.
  MNDDP_H5_CHECK(H5Pset_all_coll_metadata_ops(access.get(), true));
  MNDDP_H5_CHECK(H5Pset_coll_metadata_write(access.get(), true));
  // Large arrays start on 1 MiB boundaries (a typical parallel file system stripe).
  MNDDP_H5_CHECK(H5Pset_alignment(access.get(), 1 << 20, 1 << 20));
#if H5_VERSION_GE(1, 10, 7)
  MNDDP_H5_CHECK(H5Pset_file_locking(access.get(), false, true));  // locks fail on NFS and Lustre
#endif
  impl_->file = H5Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
  if (!impl_->file) throw UsageError(fmt::format("--checkpoint-dir: cannot create '{}': {}", path, h5_take_error()));
  impl_->transfer = H5Handle(H5Pcreate(H5P_DATASET_XFER));
  MNDDP_H5_CHECK(H5Pset_dxpl_mpio(impl_->transfer.get(), H5FD_MPIO_INDEPENDENT));
  // Collective calls, independent transfers: each rank's share is one contiguous range, so the
  // two-phase aggregation of collective buffering only adds a shuffle (Open MPI's OMPIO wrote 4x
  // slower with it; docs/BENCHMARKS.md).
  MNDDP_H5_CHECK(H5Pset_dxpl_mpio_collective_opt(impl_->transfer.get(), H5FD_MPIO_INDIVIDUAL_IO));
  impl_->link_create = H5Handle(H5Pcreate(H5P_LINK_CREATE));
  MNDDP_H5_CHECK(H5Pset_create_intermediate_group(impl_->link_create.get(), 1));
  // Contiguous, allocated at creation, never filled: the writes cover every byte.
  impl_->dataset_create = H5Handle(H5Pcreate(H5P_DATASET_CREATE));
  MNDDP_H5_CHECK(H5Pset_layout(impl_->dataset_create.get(), H5D_CONTIGUOUS));
  MNDDP_H5_CHECK(H5Pset_alloc_time(impl_->dataset_create.get(), H5D_ALLOC_TIME_EARLY));
  MNDDP_H5_CHECK(H5Pset_fill_time(impl_->dataset_create.get(), H5D_FILL_TIME_NEVER));
}

ParallelCheckpointWriter::~ParallelCheckpointWriter() {
  std::lock_guard lock(hdf5_mutex());
  impl_->file.reset();
}

void ParallelCheckpointWriter::write(const ArrayView& array) {
  std::uint32_t slab_crc = 0;
  const std::optional<Failure> failure = capture_failure([&] { slab_crc = write_array(array); });
  // The array's CRC is combined from the ranks' slab CRCs (each rank checksums only what it wrote);
  // the same exchange tells every rank whether any write failed (-1), which is then agreed.
  std::vector<std::int64_t> slabs(static_cast<std::size_t>(impl_->size));
  const std::int64_t mine = failure ? -1 : static_cast<std::int64_t>(slab_crc);
  impl_->comm->allgather(&mine, slabs.data(), 1, DType::I64);
  if (std::find(slabs.begin(), slabs.end(), -1) != slabs.end()) agree_on_failure(*impl_->comm, failure);
  const std::uint32_t crc = combine_slab_checksums(array, slabs);
  agree_on_failure(*impl_->comm, capture_failure([&] {
    std::lock_guard lock(hdf5_mutex());
    H5Handle dataset(H5Dopen2(impl_->file.get(), array.path.c_str(), H5P_DEFAULT));
    MNDDP_H5_CHECK(dataset.get());
    write_string_attribute(dataset.get(), "dtype", dtype_name(array.dtype));
    write_u32_attribute(dataset.get(), "crc32", crc);
  }));
}

std::uint32_t ParallelCheckpointWriter::combine_slab_checksums(const ArrayView& array,
                                                               const std::vector<std::int64_t>& slabs) const {
  std::uint32_t crc = static_cast<std::uint32_t>(crc32_z(0L, Z_NULL, 0));
  for (int r = 0; r < impl_->size; ++r) {
    const Slab slab = slab_of(array, r, impl_->size);
    crc = static_cast<std::uint32_t>(
        crc32_combine(crc, static_cast<uLong>(slabs[static_cast<std::size_t>(r)]), static_cast<z_off_t>(slab.bytes)));
  }
  return crc;
}

std::uint32_t ParallelCheckpointWriter::write_array(const ArrayView& array) {
  std::lock_guard lock(hdf5_mutex());
  const int rank_count = static_cast<int>(array.shape.size());
  std::vector<hsize_t> dims(array.shape.begin(), array.shape.end());
  H5Handle file_space(rank_count == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank_count, dims.data(), nullptr));
  MNDDP_H5_CHECK(file_space.get());
  H5Handle dataset(H5Dcreate2(impl_->file.get(), array.path.c_str(), file_type(array.dtype), file_space.get(),
                              impl_->link_create.get(), impl_->dataset_create.get(), H5P_DEFAULT));
  if (!dataset)
    throw Error(fmt::format("'{}': cannot create array '{}': {}", impl_->path, array.path, h5_take_error()));

  const Slab slab = slab_of(array, impl_->rank, impl_->size);
  const std::size_t element_bytes = dtype_size(array.dtype);
  const hsize_t elements = std::max<hsize_t>(1, slab.bytes / element_bytes);
  H5Handle memory_space(H5Screate_simple(1, &elements, nullptr));
  if (slab.bytes == 0) {
    // Nothing to write here, but the write is collective: join it with empty selections.
    MNDDP_H5_CHECK(H5Sselect_none(memory_space.get()));
    MNDDP_H5_CHECK(H5Sselect_none(file_space.get()));
  } else if (rank_count > 0) {
    std::vector<hsize_t> start(dims.size(), 0);
    std::vector<hsize_t> count = dims;
    start[0] = static_cast<hsize_t>(slab.first_row);
    count[0] = static_cast<hsize_t>(slab.rows);
    MNDDP_H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  }
  const char* from = static_cast<const char*>(array.data) + slab.offset;
  // The checksum runs beside the write on a large slab (a spare core hides it), inline otherwise.
  std::future<std::uint32_t> crc;
  if (slab.bytes >= (8u << 20)) crc = std::async(std::launch::async, [=] { return checksum(from, slab.bytes); });
  const herr_t written = H5Dwrite(dataset.get(), memory_type(array.dtype), memory_space.get(), file_space.get(),
                                  impl_->transfer.get(), from);
  const std::uint32_t slab_crc = crc.valid() ? crc.get() : checksum(from, slab.bytes);
  if (written < 0) {
    std::string reason = h5_take_error();
    // MPI-IO reports ENOSPC as a generic write failure; the free space tells the user what happened.
    std::error_code error;
    const auto space = std::filesystem::space(std::filesystem::path(impl_->path).parent_path(), error);
    if (!error && space.available < slab.bytes)
      reason = fmt::format("no space left on the device ({:.1f} MB free)", static_cast<double>(space.available) / 1e6);
    throw Error(fmt::format("writing array '{}' to '{}' failed: {}", array.path, impl_->path, reason));
  }
  return slab_crc;
}

void ParallelCheckpointWriter::set_attribute(const std::string& name, const std::string& value) {
  std::lock_guard lock(hdf5_mutex());
  write_string_attribute(impl_->file.get(), name, value);
}

void ParallelCheckpointWriter::close() {
  std::lock_guard lock(hdf5_mutex());
  const hid_t id = impl_->file.get();
  if (id < 0) return;
  const herr_t closed = H5Fclose(id);
  impl_->file = H5Handle();  // closed (or failed): never close twice
  if (closed < 0) throw Error(fmt::format("'{}': closing the checkpoint failed: {}", impl_->path, h5_take_error()));
}

// --- reader ----------------------------------------------------------------------------------------

struct CheckpointReader::Impl {
  H5Handle file;
};

CheckpointReader::CheckpointReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  std::lock_guard lock(hdf5_mutex());
  impl_->file = h5_open_read_only(path);
}

CheckpointReader::~CheckpointReader() {
  std::lock_guard lock(hdf5_mutex());
  impl_->file.reset();
}

bool CheckpointReader::has_attribute(const std::string& name) const {
  std::lock_guard lock(hdf5_mutex());
  return H5Aexists(impl_->file.get(), name.c_str()) > 0;
}

std::string CheckpointReader::attribute(const std::string& name) const {
  std::lock_guard lock(hdf5_mutex());
  if (H5Aexists(impl_->file.get(), name.c_str()) <= 0)
    throw UsageError(fmt::format("checkpoint '{}': attribute '{}' is missing", path_, name));
  return read_string_attribute(impl_->file.get(), name);
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
  H5Handle dataset(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT));
  if (!dataset) throw UsageError(fmt::format("checkpoint '{}': array '{}' is missing", path_, path));
  const DType dtype = dtype_from_name(read_string_attribute(dataset.get(), "dtype"), path_ + ":" + path);
  H5Handle space(H5Dget_space(dataset.get()));
  const int rank_count = H5Sget_simple_extent_ndims(space.get());
  MNDDP_H5_CHECK(rank_count);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank_count));
  if (rank_count > 0) MNDDP_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  std::uint8_t* destination = nullptr;
  if (out != nullptr) {
    out->dtype = dtype;
    out->shape.assign(dims.begin(), dims.end());
    out->bytes.resize(static_cast<std::size_t>(out->numel()) * dtype_size(dtype));
    destination = out->bytes.data();
  }
  std::uint32_t actual = 0;
  try {
    ScratchBuffers none;
    actual = read_checksummed(dataset.get(), memory_type(dtype), dims, dtype_size(dtype), destination,
                              scratch != nullptr ? *scratch : none);
  } catch (const Error& e) {
    throw UsageError(fmt::format("checkpoint '{}': array '{}' cannot be read: {}", path_, path, e.what()));
  }
  std::uint32_t stored = 0;
  H5Handle attribute(H5Aopen(dataset.get(), "crc32", H5P_DEFAULT));
  if (!attribute || H5Aread(attribute.get(), H5T_NATIVE_UINT32, &stored) < 0)
    throw UsageError(fmt::format("checkpoint '{}': array '{}' has no checksum", path_, path));
  if (actual != stored)
    throw UsageError(fmt::format("checkpoint '{}': array '{}' is corrupt (CRC-32 {:08x}, expected {:08x})", path_, path,
                                 actual, stored));
}

void CheckpointReader::verify_all() const {
  std::vector<std::string> datasets;
  {
    std::lock_guard lock(hdf5_mutex());
    auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* out) -> herr_t {
      if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->emplace_back(name);
      return 0;
    };
    if (H5Ovisit(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC, visit, &datasets) < 0)
      throw UsageError(fmt::format("checkpoint '{}' cannot be walked: {}", path_, h5_take_error()));
  }
  ScratchBuffers scratch;  // reused by every array: no fresh pages to fault in per array
  for (const auto& name : datasets) read_array(name, nullptr, &scratch);  // streamed: checked, not kept
}

}  // namespace mnddp
