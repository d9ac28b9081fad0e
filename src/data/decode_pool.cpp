// DecodePool: a fixed set of threads sharing one job at a time, indices claimed under a lock
// (chunks take a millisecond each; the lock is not the cost).
#include "decode_pool.hpp"

#include <algorithm>
#include <utility>

#include "mnddp/guarded_thread.hpp"

namespace mnddp {

DecodePool::DecodePool(int threads) : scratch_(static_cast<std::size_t>(std::max(1, threads))) {
  workers_.reserve(scratch_.size());  // push_back below never throws with a started thread in hand
  try {
    for (std::size_t w = 0; w + 1 < scratch_.size(); ++w)
      workers_.push_back(guarded_thread("decode", [this, w] { work(w); }));
  } catch (...) {
    stop_workers();  // the ones started: a joinable thread must not be destroyed
    throw;
  }
}

DecodePool::~DecodePool() { stop_workers(); }

void DecodePool::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void DecodePool::claim_and_run(std::vector<unsigned char>& scratch) {
  while (true) {
    std::size_t index = 0;
    const Task* task = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= count_ || failure_) return;
      index = next_++;
      task = task_;
    }
    try {
      (*task)(index, scratch);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
  }
}

void DecodePool::work(std::size_t worker) {
  std::size_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    claim_and_run(scratch_[worker]);
    std::lock_guard lock(mutex_);
    if (--busy_ == 0) finished_.notify_one();
  }
}

void DecodePool::run(std::size_t count, const Task& task) {
  if (count == 0) return;
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    count_ = count;
    next_ = 0;
    failure_ = nullptr;
    busy_ = workers_.size();
    ++generation_;
  }
  wake_.notify_all();
  claim_and_run(scratch_.back());
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return busy_ == 0; });
  task_ = nullptr;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace mnddp
