// CompressedChunks: the chunks of a gzip (and shuffle) compressed HDF5 dataset, read and decoded
// outside HDF5. Through HDF5 a compressed chunk is read, inflated and unshuffled on one thread under
// HDF5's global lock; here the chunk's stored bytes are located once (H5Dget_chunk_info_by_coord),
// read with pread and decoded by zlib and a by-hand unshuffle on any thread, so H5Reader can decode
// a batch's chunks on a pool of threads.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mnddp {

class CompressedChunks {
 public:
  // The chunks of `dataset` (in `file`, opened read-only from `path`) when H5Reader can decode them
  // itself: the sec2 driver, no user block, chunks of whole rows, a filter pipeline of deflate and/or
  // shuffle only, and a file type equal to `memory_type`. Otherwise null (HDF5 reads the dataset).
  // Call with hdf5_mutex() held.
  static std::unique_ptr<CompressedChunks> open(hid_t file, hid_t dataset, hid_t memory_type, const std::string& path);

  std::int64_t rows_per_chunk() const { return rows_per_chunk_; }
  std::size_t row_bytes() const { return row_bytes_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }  // decoded, edge chunks included
  std::size_t chunk_count() const { return locations_.size(); }

  // Where chunk `chunk` is stored; false when it was never written (HDF5 supplies fill values). The
  // first call for a chunk asks HDF5 (taking hdf5_mutex()); later ones are a lookup. Not thread-safe.
  bool locate(std::size_t chunk);
  // Reads the located chunk's stored bytes and decodes them into `out` (chunk_bytes()); `scratch`
  // holds the compressed bytes. No HDF5 call and no lock: call from any thread, one per chunk.
  // Throws UsageError naming the file and chunk on a read or decode error.
  void decode(std::size_t chunk, std::vector<unsigned char>& scratch, unsigned char* out) const;

 private:
  enum class Filter { Deflate, Shuffle };
  struct Location {
    bool known = false;
    bool allocated = false;
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    unsigned filter_mask = 0;  // bit i set: filter i of the pipeline was skipped for this chunk
  };
  CompressedChunks() = default;

  int fd_ = -1;  // HDF5's own descriptor; the file handle outlives this object
  std::string path_;
  std::string name_;    // the dataset's, for messages
  hid_t dataset_ = -1;  // not owned; chunk lookups only
  std::size_t element_bytes_ = 0;
  std::size_t row_bytes_ = 0;
  std::int64_t rows_per_chunk_ = 0;
  std::size_t chunk_bytes_ = 0;
  int rank_ = 1;
  std::vector<Filter> pipeline_;  // in writing order; decoded in reverse
  std::vector<Location> locations_;
};

}  // namespace mnddp
