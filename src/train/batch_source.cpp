// Batches on the device: wrapped on the CPU, staged ahead on a side stream on a GPU.
#include "mnddp/train/batch_source.hpp"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "mnddp/device_binding.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/guarded_thread.hpp"
#include "mnddp/progress.hpp"

namespace mnddp {

struct BatchSource::Staged {
  DeviceBatch tensors;
  std::vector<std::int64_t> ids;
  c10::Event copied{c10::DeviceType::CUDA};  // recorded on the side stream after the copy
};

BatchSource::BatchSource(Loader& loader, c10::Device device, int depth)
    : loader_(loader), device_(device), depth_(static_cast<std::size_t>(std::max(depth, 1))) {
  if (device_.is_cuda()) thread_ = guarded_thread("batch staging", [this] { stage(); });
}

BatchSource::~BatchSource() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchSource::stage() {
  Activity::name_thread("batch staging");
  try {
    bind_rank_device();
    const auto* cuda = c10::impl::getDeviceGuardImpl(c10::kCUDA);
    const c10::Stream side = cuda->getStreamFromGlobalPool(device_, /*isHighPriority=*/false);
    const c10::StreamGuard on_side(side);  // to_device's copies queue on the side stream
    while (true) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
      }
      std::optional<HostBatch> host = loader_.next();
      auto staged = std::make_unique<Staged>();
      if (host) {
        staged->tensors = to_device(*host, device_);
        staged->ids = std::move(host->ids);
        staged->copied.record(side);
      }
      std::lock_guard lock(mutex_);
      if (!host) {
        ended_ = true;
        changed_.notify_all();
        return;
      }
      ready_.push_back(std::move(staged));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    ended_ = true;
    changed_.notify_all();
  }
}

std::optional<BatchSource::Batch> BatchSource::next() {
  progress::note();  // a batch is asked for; the step's own note follows its end
  if (!device_.is_cuda()) {
    std::optional<HostBatch> host = loader_.next();
    if (!host) return std::nullopt;
    Batch batch;
    batch.ids = host->ids;
    batch.host = std::move(host);
    batch.tensors = to_device(*batch.host, device_);  // borrows batch.host's memory
    return batch;
  }
  std::unique_ptr<Staged> staged;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || ended_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    staged = std::move(ready_.front());
    ready_.pop_front();
  }
  changed_.notify_all();
  const auto* cuda = c10::impl::getDeviceGuardImpl(c10::kCUDA);
  const c10::Stream current = cuda->getStream(device_);
  staged->copied.block(current);  // the step's stream waits for the copy, on the GPU
  // Allocated on the side stream, used on the current one: the allocator must not hand their memory
  // back to the side stream's next copies before the step has used it.
  for (const at::Tensor* t : {&staged->tensors.x, &staged->tensors.y})
    if (t->defined()) cuda->recordDataPtrOnStream(t->storage().data_ptr(), current);
  return Batch{std::move(staged->tensors), std::move(staged->ids), std::nullopt};
}

}  // namespace mnddp
