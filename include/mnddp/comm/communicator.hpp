// The Communicator interface: typed in-place collectives on raw buffers, no torch, no autograd.
// Backends: MpiComm (CPU, always) and NcclComm (GPU, when built with NCCL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/comm/dtype.hpp"

namespace mnddp {

// A collective in flight. Completion is observed with wait(); an error inside the collective is
// rethrown there.
class CommWork {
 public:
  virtual ~CommWork() = default;
  // Returns once the result is usable. For device backends `consumer_stream` (a cudaStream_t) is
  // made to wait for the result instead of blocking the host; host backends ignore it.
  virtual void wait(void* consumer_stream = nullptr) = 0;
  virtual bool is_completed() = 0;
  // Seconds the collective itself ran (queueing excluded), once completed; 0 where unknown.
  virtual double busy_seconds() { return 0.0; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;
  bool is_root() const { return rank() == 0; }

  // In place: every rank ends with op over all ranks' `count` elements. Avg divides by size().
  virtual void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DType dtype, int root) = 0;
  // `recv` holds size() * count elements, rank r's contribution at offset r * count. In place when
  // `send` is `recv`'s own slot (recv + rank() * count elements).
  virtual void allgather(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void barrier() = 0;
  // Sends `bytes` to rank `to` while receiving as many from rank `from` (the pre-flight link test,
  // diagnose/link_test.hpp). Every rank calls it at once, with its own partners.
  virtual void send_receive(const void* send, int to, void* recv, int from, std::size_t bytes);

  // Starts an in-place all-reduce and returns at once. Asynchronous collectives run in the order
  // they are started, on a channel of their own (so they never interleave with the blocking calls
  // above); every rank must start the same sequence. For device backends the collective is ordered
  // after the work already queued on `producer_stream` (a cudaStream_t).
  virtual std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                    void* producer_stream = nullptr) = 0;
  // Starts an in-place reduce-scatter, on the same channel and in the same order as allreduce_async:
  // `buffer` holds size() * count elements; once complete, elements [rank() * count, (rank() + 1) *
  // count) hold op over every rank's elements at that place, and the rest of the buffer is undefined.
  virtual std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                         void* producer_stream = nullptr) = 0;
  // True when buffers must live in GPU memory (NCCL); false for host memory (MPI).
  virtual bool uses_device_memory() const { return false; }

  // Collectives issued so far on this communicator (used by tests and the no_sync check).
  virtual std::uint64_t collective_count() const = 0;
};

// --- Small typed helpers over the interface ---------------------------------------------------
void broadcast_string(Communicator& comm, std::string& text, int root = 0);
std::int64_t allreduce_sum(Communicator& comm, std::int64_t value);
std::int64_t allreduce_max(Communicator& comm, std::int64_t value);
std::int64_t allreduce_min(Communicator& comm, std::int64_t value);
double allreduce_sum(Communicator& comm, double value);
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine);

// A failure seen by some ranks, to be agreed on by all.
struct Failure {
  std::string message;
  int exit_code;
};

// Failure is collective: every rank calls this at the same point with its own verdict. If any rank
// failed, every rank throws the same Error (the lowest failing rank's message and exit code,
// marked collective), so the job ends cleanly everywhere with one message.
void agree_on_failure(Communicator& comm, const std::optional<Failure>& mine);

// Runs `work` on the root only and makes its failure collective: the common "rank 0 reads, then
// broadcasts" shape. Non-root ranks pass straight to the agreement.
template <typename Work>
void on_root_then_agree(Communicator& comm, Work&& work);

// Every rank runs `work`; a failure anywhere becomes the same collective Error everywhere.
template <typename Work>
void on_all_then_agree(Communicator& comm, Work&& work);

}  // namespace mnddp

#include "mnddp/comm/communicator_inl.hpp"
