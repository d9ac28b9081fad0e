// The checkpoint file: named typed arrays and string attributes in one HDF5 file. Written with
// parallel HDF5 (MPI-IO, collective metadata) where every rank writes a disjoint row range of every
// array; read serially. Each array carries a checksum of its bytes (XXH3-64 blocks; CRC-32 in format
// 1 files), checked on every read. Torch-free:
// the torch side (training_state.hpp) turns modules and optimizers into arrays.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/default_init_allocator.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

// 2: XXH3-64 block checksums (array_checksum.hpp); 1: CRC-32 (still read).
inline constexpr int kCheckpointFormatVersion = 2;

// The checkpoint itself is bad: a checksum mismatch or a broken structure (not HDF5, no header,
// an array without its dtype or checksum). Only this may set a checkpoint aside for good; an error
// reading a sound file (EIO, EACCES, a vanished mount) is a plain UsageError and leaves it alone.
class CorruptCheckpoint : public UsageError {
 public:
  using UsageError::UsageError;
};

// One array to store: replicated state (every rank passes the same bytes), so any rank can write
// any part of it.
struct ArrayView {
  std::string path;  // "model/fc.weight": groups are created as needed
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;  // empty: a scalar
  const void* data = nullptr;
};

// This rank's share of an array that no rank holds whole (ZeRO's optimizer state): the elements
// [first, first + count) of the array in C order. The shares of all ranks cover it exactly once.
struct ArrayShare {
  std::string path;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::int64_t first = 0;
  std::int64_t count = 0;
  const void* data = nullptr;
};

struct ArrayData {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>> bytes;
  std::int64_t numel() const;
};

std::uint32_t crc32_checksum(const void* data, std::size_t bytes);  // zlib's CRC-32: format 1

class ParallelCheckpointWriter {
 public:
  // Collective over `comm` (whose MPI communicator is `mpi_comm`): creates `path`, truncating a file
  // there, or with Create::Exclusive failing when anything is there (a symlink included).
  enum class Create { Truncate, Exclusive };
  ParallelCheckpointWriter(Communicator& comm, MPI_Comm mpi_comm, const std::string& path,
                           Create create = Create::Truncate);
  ~ParallelCheckpointWriter();  // closes if close() was not reached (an error is on its way)
  ParallelCheckpointWriter(const ParallelCheckpointWriter&) = delete;
  ParallelCheckpointWriter& operator=(const ParallelCheckpointWriter&) = delete;

  // Collective, same arguments on every rank: creates the dataset and writes it, rank r taking
  // rows [r*n/W, (r+1)*n/W) of the first dimension (ranks with no rows still join the write). A
  // failure on any rank (a full disk seen by one writer) is agreed after the array, so every rank
  // throws the same error instead of some waiting in the next collective call.
  void write(const ArrayView& array);
  // Collective, the same path, dtype and shape on every rank: each rank writes its share of the array
  // as a hyperslab selection of it, so the file is the one write() makes, whatever the world size.
  // The checksum is write()'s too: a checksum block that spans shares is hashed by the rank holding
  // its first byte, which receives the rest from the ranks after it (at most a block per boundary).
  void write_share(const ArrayShare& share);
  // Collective, same arguments on every rank: a string attribute on the file's root group.
  void set_attribute(const std::string& name, const std::string& value);
  // Collective: closes the file; after this the bytes are on their way to storage.
  void close();

 private:
  void write_array(const ArrayView& array);        // this rank's rows, no agreement
  void write_share_data(const ArrayShare& share);  // this rank's share, no agreement
  // Every rank's block hashes of an array (after its data): agrees on failures, stores the checksum.
  void finish_array(const std::string& path, DType dtype, const std::optional<Failure>& failure,
                    const std::vector<std::uint64_t>& mine, const std::vector<std::size_t>& blocks_per_rank,
                    const std::vector<int>& order);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serial, read-only, no file locking. Throws CorruptCheckpoint naming the file for a checksum
// mismatch or a broken structure, and UsageError when the file cannot be read at all.
class CheckpointReader {
 public:
  using ScratchBuffers = std::array<std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>>, 2>;

  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  bool has_attribute(const std::string& name) const;
  std::string attribute(const std::string& name) const;
  std::vector<std::string> attribute_names() const;  // the root's, sorted by name
  bool has_array(const std::string& path) const;
  // Names of the arrays (datasets) directly under `group`, sorted.
  std::vector<std::string> list(const std::string& group) const;
  ArrayData read(const std::string& path) const;  // verifies the checksum
  // The elements [first, first + count) of an array in C order, unverified: for ranks that each read
  // their share of a checkpoint whose every array was verified before (verify_checkpoint_in_parallel).
  // `shape`, when given, receives the whole array's shape.
  ArrayData read_share(const std::string& path, std::int64_t first, std::int64_t count,
                       std::vector<std::int64_t>* shape = nullptr) const;
  void verify_all() const;                    // reads and checks every array in the file
  std::vector<std::string> datasets() const;  // every array's path, as HDF5 walks the file

  // Share `share` of `shares` of an array's checksum blocks ([n*share/shares, n*(share+1)/shares)),
  // read and hashed, and the checksum the file stores: for ranks that verify a checkpoint together
  // (verify_checkpoint_in_parallel). Format 2 arrays only (CorruptCheckpoint without xxh3_64).
  struct BlockHashes {
    std::size_t blocks = 0;  // of the whole array
    std::vector<std::uint64_t> mine;
    std::uint64_t stored = 0;
  };
  BlockHashes hash_blocks(const std::string& path, std::size_t share, std::size_t shares) const;

 private:
  std::int64_t file_id() const;  // the open HDF5 file (an hid_t; HDF5 stays out of this header)
  // out == nullptr: check only, streaming through `scratch`.
  void read_array(const std::string& path, ArrayData* out, ScratchBuffers* scratch) const;

  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mnddp
