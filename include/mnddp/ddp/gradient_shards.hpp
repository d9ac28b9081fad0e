// ZeRO-2's side of the Reducer (--zero 2): bucket buffers live only while their reduce-scatter does,
// taken from and given back to a small pool, and each rank keeps one chunk of every bucket: its
// shard of the averaged gradients. So the full gradients exist only a few buckets at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "mnddp/zero/shard_layout.hpp"

namespace mnddp {

class GradientShards {
 public:
  // `wire`: each bucket's buffer options (the wire dtype, in the communicator's memory); `kept`: its
  // gradients' options (the parameters' dtype and device).
  GradientShards(ShardLayout layout, int rank, std::vector<at::TensorOptions> wire,
                 std::vector<at::TensorOptions> kept);

  const ShardLayout& layout() const { return layout_; }
  int rank() const { return rank_; }

  // Whether the pool holds a buffer that fits bucket `bucket`.
  bool has_free(std::size_t bucket) const;
  // A buffer of at least bucket `bucket`'s padded size (from the pool, or new) whose padding is zero;
  // use its first padded() elements.
  at::Tensor acquire(std::size_t bucket);
  // Bucket `bucket`'s reduce-scatter is complete in `flat` (the buffer acquire() gave, `storage`):
  // this rank's chunk is kept and the buffer goes back to the pool.
  void keep_chunk_and_release(std::size_t bucket, const at::Tensor& flat, at::Tensor storage);
  // This rank's chunk of the bucket's averaged gradients (valid after the step's finalize()).
  const at::Tensor& gradient(std::size_t bucket) const { return kept_[bucket]; }

  // Bytes of bucket buffers allocated so far (pooled or in use): what the pool costs at its peak.
  std::int64_t buffer_bytes() const { return buffer_bytes_; }
  std::int64_t kept_bytes() const;

 private:
  ShardLayout layout_;
  int rank_;
  std::vector<at::TensorOptions> wire_;
  std::vector<at::Tensor> kept_;
  std::vector<at::Tensor> pool_;
  std::int64_t buffer_bytes_ = 0;
};

}  // namespace mnddp
