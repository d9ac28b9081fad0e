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
#include "mnddp/cuda_stream.hpp"

namespace mnddp {

// A collective in flight. Completion is observed with wait() or wait_on(); an error inside the
// collective is rethrown there.
class CommWork {
 public:
  virtual ~CommWork() = default;
  // Blocks the calling thread until the result is in the buffer. On a device backend this is a host
  // wait on the GPU: counted (host_waits.hpp), and never what the training step wants.
  virtual void wait() = 0;
  // Makes the work queued on `consumer` from now on wait for the result. A device backend (NCCL)
  // does it on the GPU and returns at once; a host backend (MPI) waits here, on the host, since its
  // result lands in host memory.
  virtual void wait_on(CudaStream consumer) = 0;
  virtual bool is_completed() = 0;
  // Seconds the collective itself ran (queueing excluded); waits for it to complete. 0 where unknown.
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
  // above); every rank must start the same sequence. `producer`: the stream whose work queued so far
  // writes `buffer`. A device backend orders the collective after it on the GPU (no stream: the
  // legacy default stream); a host backend's thread waits on the host for it before the collective
  // runs (a host buffer filled by asynchronous device-to-host copies).
  virtual std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                    std::optional<CudaStream> producer = std::nullopt) = 0;
  // Starts an in-place reduce-scatter, on the same channel and in the same order as allreduce_async:
  // `buffer` holds size() * count elements; once complete, elements [rank() * count, (rank() + 1) *
  // count) hold op over every rank's elements at that place, and the rest of the buffer is undefined.
  virtual std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                         std::optional<CudaStream> producer = std::nullopt) = 0;
  // A broadcast and an all-gather (arguments as the blocking calls') that a device backend queues
  // after `producer` and returns at once, so that a stream can wait for them (wait_on) instead of the
  // host. A host backend runs the blocking call and returns completed work.
  virtual std::shared_ptr<CommWork> broadcast_async(void* buffer, std::size_t count, DType dtype, int root,
                                                    std::optional<CudaStream> producer = std::nullopt);
  virtual std::shared_ptr<CommWork> allgather_async(const void* send, void* recv, std::size_t count, DType dtype,
                                                    std::optional<CudaStream> producer = std::nullopt);
  // True when buffers must live in GPU memory (NCCL); false for host memory (MPI).
  virtual bool uses_device_memory() const { return false; }

  // Collectives issued so far on this communicator (used by tests and the no_sync check).
  virtual std::uint64_t collective_count() const = 0;
};

// --- Small typed helpers over the interface ---------------------------------------------------
// Control messages: host values, so a host communicator only (the MPI control plane). A device
// communicator (NCCL) would take the host pointers as device ones: these refuse it (std::logic_error).
void broadcast_string(Communicator& comm, std::string& text, int root = 0);
std::int64_t allreduce_sum(Communicator& comm, std::int64_t value);
std::int64_t allreduce_max(Communicator& comm, std::int64_t value);
std::int64_t allreduce_min(Communicator& comm, std::int64_t value);
double allreduce_sum(Communicator& comm, double value);
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine);
// Throws std::logic_error naming `what` when `comm` needs device memory (the helpers above and
// below call it).
void require_host_comm(const Communicator& comm, const char* what);

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
