// NcclComm: the GPU backend. Bootstrapped exactly as the design says: rank 0 calls ncclGetUniqueId,
// the id travels over MPI_Bcast, every rank calls ncclCommInitRankConfig with a non-blocking config
// (so a stuck init or collective can be aborted). Collectives run on a dedicated high-priority
// stream, ordered against the caller's stream with CUDA events. Needs only nccl.h and the CUDA
// runtime, no torch. Built when MNDDP_HAVE_NCCL.
#pragma once

#include "mnddp/build_config.hpp"

#if MNDDP_HAVE_NCCL

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/communicator.hpp"

namespace mnddp {

class NcclComm final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks; `device` is this rank's CUDA device index.
  // `init_timeout_s` bounds ncclCommInitRankConfig (it is polled, then aborted).
  NcclComm(Communicator& bootstrap, int device, double init_timeout_s = 600.0);
  ~NcclComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }
  bool uses_device_memory() const override { return true; }

  // Blocking calls: ordered after work queued on the legacy default stream (torch's default
  // current stream); they return when the result is in `buffer`.
  void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) override;
  void barrier() override;
  std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                            void* producer_stream = nullptr) override;
  std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                 void* producer_stream = nullptr) override;
  std::uint64_t collective_count() const override { return collectives_; }

  // ncclCommAbort: for the abort path (Runtime::abort_all); safe to call once from any thread.
  void abort();
  // Throws LibraryError if NCCL has reported an asynchronous error on this communicator (Error
  // once it was aborted).
  void check_async_error();
  // The same as a message, for the watchdog's health check (comm/backend.cpp registers it);
  // nothing once aborted.
  std::optional<std::string> async_error();

  struct Handles;  // NCCL and CUDA handles (kept out of this header)

 private:
  // Opens the watchdog's record of a collective about to be queued; `done` says when the GPU is done.
  std::uint64_t track(const char* op, std::size_t bytes, std::function<bool()> done);

  std::unique_ptr<Handles> handles_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  std::atomic<std::uint64_t> collectives_{0};
  std::atomic<bool> aborted_{false};
  CollectiveTracker tracker_{"nccl"};
};

}  // namespace mnddp

#endif  // MNDDP_HAVE_NCCL
