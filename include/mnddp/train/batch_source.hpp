// The training loop's batches, on the rank's device. On the CPU a loader batch is wrapped where it
// lies. On a GPU (F13 of the GPU review) a thread of its own takes the loader's batches ahead of the
// step, copies each into pinned memory and on to the device on a side stream, and hands it over
// with an event: the step's stream waits for the copy on the GPU. The training thread then neither
// copies into pinned memory nor queues the host-to-device copy on its compute stream, where it
// could not overlap the step before it (PyTorch's DataLoader pins in a thread too, and copies on the
// current stream).
#pragma once

#include <c10/core/Device.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "mnddp/data/loader.hpp"
#include "mnddp/train/device_batch.hpp"

namespace mnddp {

class BatchSource {
 public:
  // `loader` must outlive the source. `depth`: batches staged on the device ahead of the step (GPU).
  BatchSource(Loader& loader, c10::Device device, int depth = 2);
  ~BatchSource();  // stops and joins the staging thread
  BatchSource(const BatchSource&) = delete;
  BatchSource& operator=(const BatchSource&) = delete;

  struct Batch {
    DeviceBatch tensors;            // ready for work queued on the current stream from now on
    std::vector<std::int64_t> ids;  // the samples' global indices
    std::optional<HostBatch> host;  // on the CPU, the memory `tensors` borrows: keep it with them
  };
  // The next batch; nothing at the loader's end. A loader error is rethrown here.
  std::optional<Batch> next();

 private:
  struct Staged;
  void stage();  // the staging thread

  Loader& loader_;
  c10::Device device_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Staged>> ready_;
  bool ended_ = false;  // the loader has no more (or failed: error_)
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace mnddp
