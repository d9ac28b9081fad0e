// Internal: the MPI backend's asynchronous channel. One background thread starts nonblocking
// all-reduces in FIFO order on a communicator of its own and drives their progress (Open MPI
// advances nonblocking collectives only inside MPI calls), sleeping briefly between polls so that
// it does not take a core away from the backward pass.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "mnddp/comm/communicator.hpp"

namespace mnddp::mpi_detail {

class AsyncChannel {
 public:
  explicit AsyncChannel(MPI_Comm parent);
  ~AsyncChannel();  // lets started collectives finish, then joins the thread
  AsyncChannel(const AsyncChannel&) = delete;
  AsyncChannel& operator=(const AsyncChannel&) = delete;

  std::shared_ptr<CommWork> allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op);

  struct Op;  // one queued collective (public for the Work that waits on it)

 private:
  void run();
  bool start(Op& op);     // false (with op.error set) when MPI refused
  bool progress(Op& op);  // true when complete

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 1;
  std::mutex mutex_;
  std::condition_variable wake_;  // the thread: new work or stop
  std::deque<std::shared_ptr<Op>> queued_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mnddp::mpi_detail
