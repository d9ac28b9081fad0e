// H5Reader: reads samples by global index from the shards of a ShardIndex. Indices are sorted and
// coalesced into contiguous hyperslab runs per shard (one H5Dread per shard per batch), read in the
// file's dtype and converted to float32. Files stay open for the reader's lifetime.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "mnddp/data/shard_index.hpp"

namespace mnddp {

class H5Reader {
 public:
  explicit H5Reader(ShardIndex index);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  const ShardIndex& index() const { return index_; }

  // Fills x_out (indices.size() * sample_numel floats) and y_out (indices.size() labels) in the
  // order of `indices`. Thread-safe: every HDF5 call holds hdf5_mutex().
  void read(std::span<const std::int64_t> indices, float* x_out, std::int64_t* y_out);

 private:
  struct OpenShards;
  ShardIndex index_;
  std::unique_ptr<OpenShards> open_;
};

}  // namespace mnddp
