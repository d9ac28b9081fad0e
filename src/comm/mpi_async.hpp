// Internal: the MPI backend's asynchronous channel. A background thread runs the queued all-reduces
// one after another, in submission order, on a communicator of its own, while the caller goes on
// (the backward pass). Blocking MPI_Allreduce in a thread, as Horovod does, rather than
// MPI_Iallreduce: Open MPI progresses nonblocking collectives only inside MPI calls, and its
// nonblocking algorithms were 2.3x slower than the tuned blocking ones for 214 MB on 2 ranks.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/communicator.hpp"

namespace mnddp::mpi_detail {

enum class AsyncKind { AllReduce, ReduceScatter };  // Communicator::allreduce_async, reduce_scatter_async

class AsyncChannel {
 public:
  AsyncChannel(MPI_Comm parent, const std::string& name, ChannelPace pace);
  ~AsyncChannel();  // finishes the queued collectives, then joins the thread
  AsyncChannel(const AsyncChannel&) = delete;
  AsyncChannel& operator=(const AsyncChannel&) = delete;

  // Queues one collective over `buffer` (in place; see the Communicator's calls of the same kind).
  // `producer`: a CUDA stream whose queued copies fill the buffer; the thread waits for them first.
  std::shared_ptr<CommWork> submit(AsyncKind kind, void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                   std::optional<CudaStream> producer = std::nullopt);

  struct Op;  // one queued collective (public for the Work that waits on it)

 private:
  void run();
  void execute(Op& op);
  void reduce_scatter(Op& op, char* mine);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;
  int rank_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;  // the thread: new work or stop
  std::deque<std::shared_ptr<Op>> queued_;
  std::size_t in_flight_ = 0;  // queued or executing; under mutex_
  bool stop_ = false;
  CollectiveTracker tracker_;
  CollectiveCheck check_;      // the channel's thread only
  std::exception_ptr broken_;  // after a failed collective every later one fails at once; written by
                               // the thread, read by others under mutex_ when in_flight_ is 0
  std::thread thread_;
};

}  // namespace mnddp::mpi_detail
