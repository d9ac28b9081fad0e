// DecodePool: threads that decode a batch's compressed chunks together. The calling thread works
// too, so a pool of 1 is the caller alone (no thread, no hand-off).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mnddp {

class DecodePool {
 public:
  // A task's own scratch buffer: one per thread, kept between calls.
  using Task = std::function<void(std::size_t index, std::vector<unsigned char>& scratch)>;

  explicit DecodePool(int threads);
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs task(i) for every i in [0, count) on the pool and the calling thread and returns when all
  // are done, rethrowing the first exception a task threw. One call at a time.
  void run(std::size_t count, const Task& task);

 private:
  void stop_workers();  // stops and joins the workers started
  void work(std::size_t worker);
  void claim_and_run(std::vector<unsigned char>& scratch);

  std::vector<std::thread> workers_;
  std::vector<std::vector<unsigned char>> scratch_;  // [worker], the caller's last
  std::mutex mutex_;
  std::condition_variable wake_;      // workers: a new job, or stop
  std::condition_variable finished_;  // the caller: every worker is done with the job
  const Task* task_ = nullptr;
  std::size_t count_ = 0;
  std::size_t next_ = 0;        // the next index to claim
  std::size_t generation_ = 0;  // bumped per job
  std::size_t busy_ = 0;        // workers still in the current job
  std::exception_ptr failure_;
  bool stop_ = false;
};

}  // namespace mnddp
