// DirectRows: where each sample row of an unfiltered HDF5 dataset lies in its file, so that H5Reader
// can read rows with preadv straight into their destinations, outside HDF5 and its lock.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mnddp {

class DirectRows {
 public:
  // One row to read: its byte offset in the file (from offset()) and where its bytes go.
  struct Target {
    std::uint64_t offset;
    void* destination;
  };

  // The rows of `dataset` (in `file`, opened read-only from `path`), when the bytes of each row lie
  // together in the file exactly as `memory_type` lays them out in memory: the sec2 driver, no
  // user block, a contiguous layout in the file itself or chunks of whole rows without filters, and
  // a file type equal to `memory_type` (same byte order). Otherwise null: HDF5 reads the dataset.
  // Call with hdf5_mutex() held.
  static std::unique_ptr<DirectRows> open(hid_t file, hid_t dataset, hid_t memory_type, const std::string& path);

  std::size_t row_bytes() const { return row_bytes_; }
  // The file offset of `row`, or nullopt when its chunk was never written (HDF5 supplies fill values
  // there). The first call for a chunk asks HDF5 (holding hdf5_mutex()); later ones are a lookup.
  std::optional<std::uint64_t> offset(std::int64_t row);
  // Reads row_bytes() bytes at each target's offset into its destination. Targets sorted by offset;
  // rows adjacent in the file are read by one preadv. No HDF5 call. Throws UsageError naming the
  // file on a read error or a file shorter than its metadata says.
  void read(std::span<const Target> targets) const;

 private:
  DirectRows(int fd, std::string path, hid_t dataset, std::size_t row_bytes, std::int64_t rows_per_chunk,
             std::size_t chunks);

  int fd_;  // HDF5's own descriptor for the file; the file handle outlives this object
  std::string path_;
  hid_t dataset_;  // not owned; chunk lookups only
  std::size_t row_bytes_;
  std::int64_t rows_per_chunk_;  // contiguous layout: every row, one "chunk"
  // Byte offset of each chunk; kUnknown until looked up, kUnallocated for a chunk never written.
  std::vector<std::uint64_t> chunk_offsets_;
};

}  // namespace mnddp
