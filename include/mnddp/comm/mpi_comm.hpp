// MpiComm: the CPU backend. Owns a duplicate of its parent communicator so our collectives can
// never match a user's or a library's messages on MPI_COMM_WORLD. Asynchronous all-reduces run on a
// second duplicate, driven by a background thread (see mpi_async.hpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <string>

#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/comm/reduction_message.hpp"

namespace mnddp {

namespace mpi_detail {
class AsyncChannel;
}

// This rank's steady clock against rank 0's (synchronise_clocks): rank 0's time is this rank's
// time plus offset_s; base_s is rank 0's time when the estimate was made (the same on every rank).
struct ClockSync {
  double offset_s = 0.0;
  double base_s = 0.0;
  double uncertainty_s = 0.0;  // half the best round trip: the offset is good to about this
};

MPI_Datatype to_mpi(DType dtype);

// Whether the MPI channels' threads and their waiters poll for 200 us before sleeping (default on).
// Off where the node's cores are all taken by compute threads (main.cpp decides).
void set_channel_spin(bool on);

class MpiComm final : public Communicator {
 public:
  // `name` labels its channels for the watchdog ("mpi" and "mpi-async"; "checkpoint" for the
  // asynchronous checkpoint writer's), unique per process. `pace`: whether its calls follow the
  // training loop (collective_tracker.hpp).
  explicit MpiComm(MPI_Comm parent = MPI_COMM_WORLD, const std::string& name = "mpi",
                   ChannelPace pace = ChannelPace::Lockstep);
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }

  void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void barrier() override;
  void send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) override;
  // Every field of `message` reduced in one MPI_Allreduce (reduction_message.hpp).
  void allreduce(ReductionMessage& message);
  // Collective: every rank's clock offset to rank 0, as NTP estimates it. Rank 0 exchanges `rounds`
  // timestamps with each rank in turn and the round trip with the least delay gives the offset. Takes
  // about size() * rounds round trips.
  ClockSync synchronise_clocks(int rounds = 8);
  // `producer`: the buffer is host memory that asynchronous copies on that CUDA stream fill; the
  // channel's thread waits for them (a HostFence recorded now) before the collective runs.
  std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                            std::optional<CudaStream> producer = std::nullopt) override;
  std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                 std::optional<CudaStream> producer = std::nullopt) override;
  std::uint64_t collective_count() const override { return collectives_; }
  // Its channel's records, for work that runs MPI's collectives inside a library (the checkpoint's
  // MPI-IO under HDF5): a phase of it opens a record here, so the watchdog sees a rank stuck there.
  CollectiveTracker& tracker() { return tracker_; }

 private:
  // Records the call for the watchdog and, with --debug-collectives, checks the ranks agree on it.
  CollectiveScope enter(const char* op, std::size_t count, DType dtype, int root = -1);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<std::uint64_t> collectives_{0};  // counted from the autograd thread too
  CollectiveTracker tracker_;
  CollectiveCheck check_;
  std::unique_ptr<mpi_detail::AsyncChannel> async_;
};

}  // namespace mnddp
