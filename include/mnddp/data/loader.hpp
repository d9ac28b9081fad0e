// Loader: a background thread reads batches ahead of the trainer into a bounded queue and applies
// the input transforms. Data knows no torch: a batch is plain host memory plus its sample ids.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/transforms.hpp"
#include "mnddp/default_init_allocator.hpp"

namespace mnddp {

// A batch's inputs: a std::vector in all but the allocator (data(), size(), indexing, iteration).
using FloatBuffer = std::vector<float, DefaultInitAllocator<float>>;
inline bool operator==(const FloatBuffer& a, const std::vector<float>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// What a batch carries besides its ids: float inputs with class labels or with regression targets,
// or token sequences (their own targets, shifted by one).
enum class BatchContent { ClassLabels, Targets, Tokens };

struct HostBatch {
  std::int64_t size = 0;             // samples in this batch
  std::vector<std::int64_t> shape;   // [size, sample_shape...]
  FloatBuffer x;                     // ClassLabels, Targets: the (transformed) inputs
  std::vector<std::int64_t> tokens;  // Tokens: the ids, [size, sample_shape...]
  std::vector<std::int64_t> y;       // ClassLabels: [size]
  FloatBuffer targets;               // Targets: [size, label_shape...] as target_shape says
  std::vector<std::int64_t> target_shape;
  std::vector<std::int64_t> ids;  // global sample indices
};

struct LoaderOptions {
  BatchContent content = BatchContent::ClassLabels;
  int prefetch_batches = 4;     // batches kept ready ahead of the consumer (at least 1)
  TransformOptions transforms;  // default: uint8 inputs scaled to [0, 1], nothing else
  // Called on the reading thread before batch b is read; what it throws ends the stream like a read
  // error (used by --inject-fault loader-exception).
  std::function<void(std::int64_t batch)> before_batch;
};

class Loader {
 public:
  // Reads `indices` in order, `batch_size` at a time (the last batch may be shorter), keeping at
  // most `options.prefetch_batches` ready ahead of the consumer. The non-finite input policy is the
  // reader's (H5ReaderOptions). Throws UsageError when the transforms do not fit the data.
  Loader(H5Reader& reader, std::vector<std::int64_t> indices, std::int64_t batch_size, LoaderOptions options);
  // Default transforms (uint8 scaled to [0, 1]).
  Loader(H5Reader& reader, std::vector<std::int64_t> indices, std::int64_t batch_size, int prefetch_batches)
      : Loader(reader, std::move(indices), batch_size,
               LoaderOptions{BatchContent::ClassLabels, prefetch_batches, {}, {}}) {}
  ~Loader();  // stops and joins the thread
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, or nullopt at the end. An exception thrown by the reader thread is rethrown here.
  std::optional<HostBatch> next();
  std::int64_t num_batches() const { return num_batches_; }
  const BatchTransform& transform() const { return transform_; }

 private:
  void run();
  void read_batch(HostBatch& batch, std::size_t sample_numel);  // ids and shape already set

  H5Reader& reader_;
  std::vector<std::int64_t> indices_;
  std::int64_t batch_size_;
  std::size_t capacity_;
  BatchTransform transform_;
  std::int64_t num_batches_;
  BatchContent content_;
  std::function<void(std::int64_t)> before_batch_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<HostBatch> ready_;
  std::exception_ptr error_;
  bool finished_ = false;
  bool stop_ = false;
  std::int64_t consumed_ = 0;
  std::thread thread_;
};

}  // namespace mnddp
