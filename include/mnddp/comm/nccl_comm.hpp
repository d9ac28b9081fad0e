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
  // `init_timeout_s` bounds ncclCommInitRankConfig (it is polled, then aborted). Throws UsageError
  // when the libnccl the process loaded is not the version mnddp was built against.
  NcclComm(Communicator& bootstrap, int device, double init_timeout_s = 600.0);
  ~NcclComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }
  bool uses_device_memory() const override { return true; }

  // Blocking calls: ordered after work queued on the legacy default stream (torch's default
  // current stream); they return when the result is in `buffer`, so each is a host wait. The
  // training path uses the asynchronous calls and waits on a stream instead (tensor_comm.hpp).
  void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) override;
  void barrier() override;
  std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                            std::optional<CudaStream> producer = std::nullopt) override;
  std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                 std::optional<CudaStream> producer = std::nullopt) override;
  std::shared_ptr<CommWork> broadcast_async(void* buffer, std::size_t count, DType dtype, int root,
                                            std::optional<CudaStream> producer = std::nullopt) override;
  std::shared_ptr<CommWork> allgather_async(const void* send, void* recv, std::size_t count, DType dtype,
                                            std::optional<CudaStream> producer = std::nullopt) override;
  std::uint64_t collective_count() const override { return collectives_; }

  // ncclCommAbort, for the abort path (Runtime::abort_all); once, from any thread. Every later use of
  // the communicator throws instead of touching it; uses in progress (a poll loop on another thread)
  // see the mark within one poll and leave before the communicator is freed (at most kAbortGrace).
  void abort();
  // Throws LibraryError if NCCL has reported an asynchronous error on this communicator (Error
  // once it was aborted).
  void check_async_error();
  // The same as a message, for the watchdog's health check (comm/backend.cpp registers it);
  // nothing once aborted.
  std::optional<std::string> async_error();

  struct Handles;  // NCCL and CUDA handles (kept out of this header)
  class Use;       // one use of the communicator in progress (abort waits for it)
  class Work;      // one queued collective

 private:
  template <typename Enqueue>
  std::shared_ptr<CommWork> launch(const char* op, std::size_t bytes, std::optional<CudaStream> producer,
                                   Enqueue&& enqueue);
  // Checks an NCCL result; with a non-blocking communicator a call may report ncclInProgress, which
  // is polled to its end (or to an abort).
  void check(int rc, const char* call);

  std::unique_ptr<Handles> handles_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  std::atomic<std::uint64_t> collectives_{0};
  std::atomic<bool> aborted_{false};
  std::atomic<int> users_{0};
  CollectiveTracker tracker_{"nccl"};
};

}  // namespace mnddp

#endif  // MNDDP_HAVE_NCCL
