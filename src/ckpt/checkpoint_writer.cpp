// Parallel-HDF5 writing of checkpoint arrays: each rank writes its slab of rows and hashes its share
// of the array's checksum blocks; the block hashes are exchanged and every rank stores the checksum.
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <mutex>
#include <numeric>

#include "checkpoint_h5.hpp"
#include "checkpoint_writer_impl.hpp"
#include "mnddp/check.hpp"
#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

using namespace ckpt_detail;

namespace {

// One rank's share of an array when writing: whole rows of the first dimension.
struct Slab {
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
  std::size_t offset = 0;  // bytes into the array
  std::size_t bytes = 0;
};

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

// Rank r's share of an array's checksum blocks: [r*n/W, (r+1)*n/W). Any rank can hash any block, the
// array being replicated; the split only spreads the work.
std::pair<std::size_t, std::size_t> blocks_of(std::size_t blocks, int rank, int size) {
  return checksum_blocks_share(blocks, static_cast<std::size_t>(rank), static_cast<std::size_t>(size));
}

std::vector<std::uint64_t> hash_blocks(const ArrayView& array, std::size_t array_bytes, std::size_t first,
                                       std::size_t last) {
  const auto* bytes = static_cast<const unsigned char*>(array.data);
  std::vector<std::uint64_t> hashes;
  for (std::size_t b = first; b < last; ++b) {
    const std::size_t offset = b * kChecksumBlockBytes;
    hashes.push_back(block_hash(bytes + offset, std::min(kChecksumBlockBytes, array_bytes - offset)));
  }
  return hashes;
}

}  // namespace

ParallelCheckpointWriter::ParallelCheckpointWriter(Communicator& agreement, MPI_Comm comm, const std::string& path,
                                                   Create create)
    : impl_(std::make_unique<Impl>()) {
  impl_->comm = &agreement;
  if (auto* mpi = dynamic_cast<MpiComm*>(&agreement)) impl_->tracker = &mpi->tracker();
  const auto phase = impl_->phase("h5 create");
  std::lock_guard lock(hdf5_mutex());
  impl_->mpi = comm;
  impl_->path = path;
  MNDDP_MPI_CHECK(MPI_Comm_rank(comm, &impl_->rank));
  MNDDP_MPI_CHECK(MPI_Comm_size(comm, &impl_->size));
  H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
  // A writer alone (the node-local level's files) needs no MPI-IO: HDF5's POSIX driver creates and
  // closes a file in a fraction of the time ompio takes to set one up. Same format either way.
  const bool alone = impl_->size == 1;
  if (alone) {
    MNDDP_H5_CHECK(H5Pset_fapl_sec2(access.get()));
  } else {
    MNDDP_H5_CHECK(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL));
    // Metadata is read and written collectively: one rank touches the file system for it, not N.
    MNDDP_H5_CHECK(H5Pset_all_coll_metadata_ops(access.get(), true));
    MNDDP_H5_CHECK(H5Pset_coll_metadata_write(access.get(), true));
  }
  // Large arrays start on 1 MiB boundaries (a typical parallel file system stripe).
  MNDDP_H5_CHECK(H5Pset_alignment(access.get(), 1 << 20, 1 << 20));
#if H5_VERSION_GE(1, 10, 7)
  MNDDP_H5_CHECK(H5Pset_file_locking(access.get(), false, true));  // locks fail on NFS and Lustre
#endif
  impl_->file = H5Handle(
      H5Fcreate(path.c_str(), create == Create::Exclusive ? H5F_ACC_EXCL : H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
  if (!impl_->file) throw UsageError(fmt::format("--checkpoint-dir: cannot create '{}': {}", path, h5_take_error()));
  impl_->transfer = H5Handle(H5Pcreate(H5P_DATASET_XFER));
  if (!alone) {
    MNDDP_H5_CHECK(H5Pset_dxpl_mpio(impl_->transfer.get(), H5FD_MPIO_INDEPENDENT));
    // Collective calls, independent transfers: each rank's share is one contiguous range, so the
    // two-phase aggregation of collective buffering only adds a shuffle (Open MPI's OMPIO wrote 4x
    // slower with it; docs/BENCHMARKS_LOG.md).
    MNDDP_H5_CHECK(H5Pset_dxpl_mpio_collective_opt(impl_->transfer.get(), H5FD_MPIO_INDIVIDUAL_IO));
  }
  impl_->link_create = H5Handle(H5Pcreate(H5P_LINK_CREATE));
  MNDDP_H5_CHECK(H5Pset_create_intermediate_group(impl_->link_create.get(), 1));
  // Contiguous, allocated at creation, never filled: the writes cover every byte.
  impl_->dataset_create = H5Handle(H5Pcreate(H5P_DATASET_CREATE));
  MNDDP_H5_CHECK(H5Pset_layout(impl_->dataset_create.get(), H5D_CONTIGUOUS));
  MNDDP_H5_CHECK(H5Pset_alloc_time(impl_->dataset_create.get(), H5D_ALLOC_TIME_EARLY));
  MNDDP_H5_CHECK(H5Pset_fill_time(impl_->dataset_create.get(), H5D_FILL_TIME_NEVER));
}

ParallelCheckpointWriter::~ParallelCheckpointWriter() {
  if (!impl_->file) return;
  const auto phase = impl_->phase("h5 close");
  std::lock_guard lock(hdf5_mutex());
  impl_->file.reset();
}

void ParallelCheckpointWriter::write(const ArrayView& array) {
  const std::size_t array_bytes = static_cast<std::size_t>(product(array.shape)) * dtype_size(array.dtype);
  const std::size_t blocks = checksum_block_count(array_bytes);
  const auto [first, last] = blocks_of(blocks, impl_->rank, impl_->size);
  // This rank's blocks are hashed beside its write when there are several (a spare core hides it).
  std::future<std::vector<std::uint64_t>> hashing;
  std::vector<std::uint64_t> mine;
  if (last - first >= 8) {
    hashing = std::async(std::launch::async,
                         [&, first = first, last = last] { return hash_blocks(array, array_bytes, first, last); });
  } else {
    mine = hash_blocks(array, array_bytes, first, last);
  }
  const std::optional<Failure> failure = capture_failure([&] {
    const auto phase = impl_->phase("h5 write", array_bytes);
    write_array(array);
  });
  if (hashing.valid()) mine = hashing.get();
  std::vector<std::size_t> per_rank;
  for (int r = 0; r < impl_->size; ++r) {
    const auto [their_first, their_last] = blocks_of(blocks, r, impl_->size);
    per_rank.push_back(their_last - their_first);
  }
  std::vector<int> order(static_cast<std::size_t>(impl_->size));
  std::iota(order.begin(), order.end(), 0);
  finish_array(array.path, array.dtype, failure, mine, per_rank, order);
}

// One exchange gives every rank every block hash and tells it whether any write failed: each rank
// sends [failed, its hashes, padding] in a slot of the largest share's size. Ranks' hashes follow
// each other in `order` (the order of the ranks' blocks).
void ParallelCheckpointWriter::finish_array(const std::string& path, DType dtype, const std::optional<Failure>& failure,
                                            const std::vector<std::uint64_t>& mine,
                                            const std::vector<std::size_t>& blocks_per_rank,
                                            const std::vector<int>& order) {
  const std::size_t slot = 1 + *std::max_element(blocks_per_rank.begin(), blocks_per_rank.end());
  std::vector<std::uint64_t> sent(slot, 0), gathered(slot * static_cast<std::size_t>(impl_->size));
  sent[0] = failure ? 1 : 0;
  std::copy(mine.begin(), mine.end(), sent.begin() + 1);
  impl_->comm->allgather(sent.data(), gathered.data(), slot, DType::I64);
  bool any_failed = false;
  std::vector<std::uint64_t> hashes;
  for (int r = 0; r < impl_->size; ++r) any_failed = any_failed || gathered[static_cast<std::size_t>(r) * slot] != 0;
  for (int r : order) {
    const std::uint64_t* theirs = gathered.data() + static_cast<std::size_t>(r) * slot;
    hashes.insert(hashes.end(), theirs + 1, theirs + 1 + blocks_per_rank[static_cast<std::size_t>(r)]);
  }
  if (any_failed) agree_on_failure(*impl_->comm, failure);
  const std::uint64_t checksum = checksum_of_blocks(hashes);
  const auto phase = impl_->phase("h5 attributes");
  agree_on_failure(*impl_->comm, capture_failure([&] {
    std::lock_guard lock(hdf5_mutex());
    H5Handle dataset(H5Dopen2(impl_->file.get(), path.c_str(), H5P_DEFAULT));
    MNDDP_H5_CHECK(dataset.get());
    write_string_attribute(dataset.get(), "dtype", dtype_name(dtype));
    write_u64_attribute(dataset.get(), "xxh3_64", checksum);
  }));
}

H5Handle ParallelCheckpointWriter::Impl::create(const std::string& array, DType dtype,
                                                const std::vector<std::int64_t>& shape, H5Handle& file_space) {
  const int rank_count = static_cast<int>(shape.size());
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  file_space = H5Handle(rank_count == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank_count, dims.data(), nullptr));
  MNDDP_H5_CHECK(file_space.get());
  H5Handle dataset(H5Dcreate2(file.get(), array.c_str(), file_type(dtype), file_space.get(), link_create.get(),
                              dataset_create.get(), H5P_DEFAULT));
  if (!dataset) throw Error(fmt::format("'{}': cannot create array '{}': {}", path, array, h5_take_error()));
  return dataset;
}

void ParallelCheckpointWriter::Impl::write_failed(const std::string& array, std::size_t bytes) {
  std::string reason = h5_take_error();
  // MPI-IO reports ENOSPC as a generic write failure; the free space tells the user what happened.
  std::error_code error;
  const auto space = std::filesystem::space(std::filesystem::path(path).parent_path(), error);
  if (!error && space.available < bytes)
    reason = fmt::format("no space left on the device ({:.1f} MB free)", static_cast<double>(space.available) / 1e6);
  throw Error(fmt::format("writing array '{}' to '{}' failed: {}", array, path, reason));
}

void ParallelCheckpointWriter::write_array(const ArrayView& array) {
  std::lock_guard lock(hdf5_mutex());
  const int rank_count = static_cast<int>(array.shape.size());
  std::vector<hsize_t> dims(array.shape.begin(), array.shape.end());
  H5Handle file_space;
  H5Handle dataset = impl_->create(array.path, array.dtype, array.shape, file_space);

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
  const herr_t written = H5Dwrite(dataset.get(), memory_type(array.dtype), memory_space.get(), file_space.get(),
                                  impl_->transfer.get(), from);
  if (written < 0) impl_->write_failed(array.path, slab.bytes);
}

void ParallelCheckpointWriter::set_attribute(const std::string& name, const std::string& value) {
  const auto phase = impl_->phase("h5 attributes");
  std::lock_guard lock(hdf5_mutex());
  write_string_attribute(impl_->file.get(), name, value);
}

void ParallelCheckpointWriter::close() {
  if (!impl_->file) return;
  const auto phase = impl_->phase("h5 close");
  std::lock_guard lock(hdf5_mutex());
  const hid_t id = impl_->file.get();
  if (id < 0) return;
  const herr_t closed = H5Fclose(id);
  impl_->file = H5Handle();  // closed (or failed): never close twice
  if (closed < 0) throw Error(fmt::format("'{}': closing the checkpoint failed: {}", impl_->path, h5_take_error()));
}

}  // namespace mnddp
