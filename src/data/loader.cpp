// Loader: one background thread reads and transforms batches ahead of the trainer into a bounded
// queue, so HDF5 reads overlap compute; reader errors surface in the consumer's next() call.
#include "mnddp/data/loader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "mnddp/device_binding.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/error.hpp"
#include "mnddp/guarded_thread.hpp"

namespace mnddp {

Loader::Loader(H5Reader& reader, std::vector<std::int64_t> indices, std::int64_t batch_size, LoaderOptions options)
    : reader_(reader),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      capacity_(static_cast<std::size_t>(std::max(1, options.prefetch_batches))),
      transform_(options.content == BatchContent::Tokens ? BatchTransform()
                                                         : BatchTransform(options.transforms, reader.index())),
      content_(options.content),
      before_batch_(std::move(options.before_batch)) {
  if (batch_size_ < 1) throw UsageError(fmt::format("--batch-size must be at least 1, got {}", batch_size_));
  if (content_ == BatchContent::Tokens && options.transforms.feature_stats)
    throw UsageError(fmt::format("--feature-stats '{}': token ids are not normalised; drop it for --task lm",
                                 options.transforms.feature_stats->path));
  const auto count = static_cast<std::int64_t>(indices_.size());
  num_batches_ = (count + batch_size_ - 1) / batch_size_;
  // Started last: every member the thread touches is initialised by now.
  thread_ = guarded_thread("data loader", [this] { run(); });
}

Loader::~Loader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Loader::run() {
  const auto sample_numel = static_cast<std::size_t>(reader_.index().sample_numel());
  const auto& sample_shape = reader_.index().sample_shape;
  Activity::name_thread("data loader");
  try {
    bind_rank_device();  // reading touches no CUDA today; whatever does later lands on our GPU
    for (std::int64_t b = 0; b < num_batches_; ++b) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < capacity_; });
        if (stop_) break;
      }
      const Activity preparing(fmt::format("preparing batch {} of {}", b + 1, num_batches_));
      if (before_batch_) before_batch_(b);
      // Read outside our lock: the consumer keeps taking ready batches meanwhile.
      const std::int64_t first = b * batch_size_;
      const std::int64_t size = std::min(batch_size_, static_cast<std::int64_t>(indices_.size()) - first);
      HostBatch batch;
      batch.size = size;
      batch.shape.push_back(size);
      batch.shape.insert(batch.shape.end(), sample_shape.begin(), sample_shape.end());
      batch.ids.assign(indices_.begin() + first, indices_.begin() + first + size);
      read_batch(batch, sample_numel);
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(batch));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

void Loader::read_batch(HostBatch& batch, std::size_t sample_numel) {
  const auto size = static_cast<std::size_t>(batch.size);
  switch (content_) {
    case BatchContent::ClassLabels:
      batch.x.resize(size * sample_numel);
      batch.y.resize(size);
      reader_.read(batch.ids, batch.x.data(), batch.y.data());
      break;
    case BatchContent::Targets: {
      const auto& label_shape = reader_.index().label_shape;
      batch.target_shape.assign(1, batch.size);
      batch.target_shape.insert(batch.target_shape.end(), label_shape.begin(), label_shape.end());
      batch.x.resize(size * sample_numel);
      batch.targets.resize(size * static_cast<std::size_t>(reader_.index().label_numel()));
      reader_.read_targets(batch.ids, batch.x.data(), batch.targets.data());
      break;
    }
    case BatchContent::Tokens:
      batch.tokens.resize(size * sample_numel);
      reader_.read_tokens(batch.ids, batch.tokens.data());
      return;
  }
  transform_.apply(batch.x.data(), batch.size);
}

std::optional<HostBatch> Loader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || finished_; });
  if (!ready_.empty()) {
    HostBatch batch = std::move(ready_.front());
    ready_.pop_front();
    ++consumed_;
    lock.unlock();
    changed_.notify_all();  // a slot is free for the reader thread
    return batch;
  }
  // Batches read before a failure were delivered first; the failure ends the stream.
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

}  // namespace mnddp
