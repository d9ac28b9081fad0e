// NcclComm: NCCL bootstrapped over MPI, non-blocking init and collectives, a dedicated comm stream
// fenced with CUDA events, asynchronous-error polling and an abort that never frees a communicator
// another thread is still polling.
#include "mnddp/comm/nccl_comm.hpp"

#if MNDDP_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "mnddp/comm/nccl_check.hpp"
#include "mnddp/comm/nccl_library.hpp"
#include "mnddp/cuda_check.hpp"
#include "mnddp/error.hpp"
#include "mnddp/host_waits.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t to_nccl(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
  }
  throw std::logic_error("to_nccl: unknown dtype");
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  throw std::logic_error("to_nccl: unknown op");
}

// Polls between checks of a non-blocking NCCL call (or a host wait) that is still in progress.
constexpr auto kNcclPoll = std::chrono::microseconds(50);
// How long abort() waits for the threads inside the communicator to notice the abort and leave.
constexpr auto kAbortGrace = std::chrono::seconds(2);

// One collective's start and end on the comm stream (timed: busy_seconds), shared by the work object
// and the watchdog's completion probe, whichever lives longer.
struct Events {
  cudaEvent_t start = nullptr;
  cudaEvent_t done = nullptr;
  std::atomic<bool> recorded{false};
  Events() {
    MNDDP_CUDA_CHECK(cudaEventCreateWithFlags(&start, cudaEventDefault));
    MNDDP_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDefault));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(done);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  bool finished() const { return recorded.load() && cudaEventQuery(done) == cudaSuccess; }
};

// Makes `stream` wait for everything queued so far on `producer` (the legacy default stream if null).
void fence(cudaStream_t producer, cudaStream_t stream) {
  cudaEvent_t ready = nullptr;
  MNDDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  MNDDP_CUDA_CHECK(cudaEventRecord(ready, producer));
  MNDDP_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  MNDDP_CUDA_CHECK(cudaEventDestroy(ready));  // destruction is deferred until the wait is done
}

}  // namespace

struct NcclComm::Handles {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // high priority, non-blocking: never serialised with torch's streams
};

// Note [NCCL abort and its pollers]
// ncclCommAbort frees the communicator, and a non-blocking communicator is polled from several
// threads: the main or autograd thread in an ncclInProgress loop or a host wait, the watchdog's
// health check. Every use holds a Use; abort() first marks the communicator aborted (a new Use then
// throws, and every poll loop checks the mark each round), waits for the uses in progress to leave,
// and only then calls ncclCommAbort. A use stuck inside NCCL itself for longer than kAbortGrace is
// not waited for: the process is on its way out (abort_all's exit deadline).
class NcclComm::Use {
 public:
  explicit Use(NcclComm& comm) : comm_(comm) {
    comm_.users_.fetch_add(1);
    if (comm_.aborted_.load()) {
      comm_.users_.fetch_sub(1);
      throw Error(fmt::format("NCCL: the communicator of rank {} was aborted", comm_.rank_));
    }
  }
  ~Use() { comm_.users_.fetch_sub(1); }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

 private:
  NcclComm& comm_;
};

class NcclComm::Work final : public CommWork {
 public:
  Work(NcclComm& comm, std::shared_ptr<Events> events, std::uint64_t seq)
      : comm_(comm), events_(std::move(events)), seq_(seq) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  void wait() override {
    note_host_wait();
    // Polled, so that an asynchronous NCCL error (or an abort) is seen instead of blocking forever.
    while (true) {
      const cudaError_t state = cudaEventQuery(events_->done);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaEventQuery");
      comm_.check_async_error();
      std::this_thread::sleep_for(kNcclPoll);
    }
    // An abort ends a stuck kernel too, and its event then completes: the result is not one.
    comm_.check_async_error();
    comm_.tracker_.end(seq_);
  }
  void wait_on(CudaStream consumer) override {
    comm_.check_async_error();
    // A null handle is the legacy default stream of the *current* device: make it the rank's.
    MNDDP_CUDA_CHECK(cudaSetDevice(comm_.device_));
    // The consumer's later work waits on the GPU; the host goes on. The record closes when the next
    // collective is launched or the watchdog's probe sees the event.
    MNDDP_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer.handle), events_->done, 0));
    comm_.check_async_error();  // aborted meanwhile: the consumer must not take the result for one
  }
  bool is_completed() override { return events_->finished(); }
  double busy_seconds() override {
    if (!events_->finished()) wait();
    float ms = 0.0f;
    MNDDP_CUDA_CHECK(cudaEventElapsedTime(&ms, events_->start, events_->done));
    return static_cast<double>(ms) / 1e3;
  }

 private:
  NcclComm& comm_;
  std::shared_ptr<Events> events_;
  std::uint64_t seq_;
};

NcclComm::NcclComm(Communicator& bootstrap, int device, double init_timeout_s)
    : handles_(std::make_unique<Handles>()), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device) {
  if (auto problem = nccl_library_problem()) throw UsageError(*problem);
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  int least = 0;
  int greatest = 0;
  MNDDP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MNDDP_CUDA_CHECK(cudaStreamCreateWithPriority(&handles_->stream, cudaStreamNonBlocking, greatest));

  // Rank 0 makes the id; MPI carries it to everyone.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (bootstrap.is_root()) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap.broadcast(&id, sizeof(id), DType::U8, 0);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return at once; failures and hangs stay abortable
  ncclResult_t rc = ncclCommInitRankConfig(&handles_->comm, size_, id, rank_, &config);
  const auto deadline = Clock::now() + std::chrono::duration<double>(init_timeout_s);
  while (rc == ncclInProgress) {
    if (Clock::now() > deadline) {
      ncclCommAbort(handles_->comm);
      handles_->comm = nullptr;
      cudaStreamDestroy(handles_->stream);  // no destructor runs after a throwing constructor
      handles_->stream = nullptr;
      throw Error(
          fmt::format("NCCL: ncclCommInitRankConfig did not finish within {} s on rank {} (device {}); "
                      "check that every rank reached start-up and that the network is usable (NCCL_DEBUG=INFO)",
                      init_timeout_s, rank_, device_));
    }
    std::this_thread::sleep_for(kNcclPoll);
    ncclCommGetAsyncError(handles_->comm, &rc);
  }
  check(rc, "ncclCommInitRankConfig");
}

void NcclComm::check(int result, const char* call) {
  auto rc = static_cast<ncclResult_t>(result);
  while (rc == ncclInProgress) {
    if (aborted_.load()) throw Error(fmt::format("NCCL: {} on rank {} ended by an abort", call, rank_));
    std::this_thread::sleep_for(kNcclPoll);
    ncclCommGetAsyncError(handles_->comm, &rc);
  }
  if (rc != ncclSuccess) check_nccl(rc, call, handles_->comm != nullptr ? ncclGetLastError(handles_->comm) : nullptr);
}

std::optional<std::string> NcclComm::async_error() {
  if (aborted_.load()) return std::nullopt;  // aborted on purpose: the abort path reports why
  try {
    const Use use(*this);
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(handles_->comm, &state);
    if (state == ncclSuccess || state == ncclInProgress) return std::nullopt;
    const char* last = ncclGetLastError(handles_->comm);
    return fmt::format("NCCL reported an asynchronous error on rank {} (device {}): {}{}{}", rank_, device_,
                       ncclGetErrorString(state), last && *last ? ": " : "", last ? last : "");
  } catch (const Error&) {
    return std::nullopt;  // aborted meanwhile
  }
}

NcclComm::~NcclComm() {
  if (handles_->comm != nullptr && !aborted_.load()) {
    // Finalize flushes outstanding work (polled, bounded); if it cannot, abort instead of hanging.
    ncclResult_t state = ncclCommFinalize(handles_->comm);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(kNcclPoll);
      ncclCommGetAsyncError(handles_->comm, &state);
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(handles_->comm);
    } else {
      ncclCommAbort(handles_->comm);
    }
  }
  if (handles_->stream != nullptr) cudaStreamDestroy(handles_->stream);
}

void NcclComm::abort() {
  if (aborted_.exchange(true) || handles_->comm == nullptr) return;
  const auto grace = Clock::now() + kAbortGrace;
  while (users_.load() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ncclCommAbort(handles_->comm);
}

void NcclComm::check_async_error() {
  const Use use(*this);  // throws once aborted: the communicator is freed
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(handles_->comm, &state);
  if (state != ncclSuccess && state != ncclInProgress) check(state, "ncclCommGetAsyncError");
}

template <typename Enqueue>
std::shared_ptr<CommWork> NcclComm::launch(const char* op, std::size_t bytes, std::optional<CudaStream> producer,
                                           Enqueue&& enqueue) {
  const Use use(*this);
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  // The records of collectives the GPU has finished close here, so that a process without a watchdog
  // keeps only the ones in flight (and their events).
  tracker_.poll();
  auto events = std::make_shared<Events>();
  ++collectives_;
  const std::uint64_t seq = tracker_.begin(op, bytes, std::nullopt, [events] { return events->finished(); });
  try {
    fence(producer ? static_cast<cudaStream_t>(producer->handle) : nullptr, handles_->stream);
    MNDDP_CUDA_CHECK(cudaEventRecord(events->start, handles_->stream));
    enqueue();
    MNDDP_CUDA_CHECK(cudaEventRecord(events->done, handles_->stream));
    events->recorded.store(true);
  } catch (...) {
    tracker_.end(seq);
    throw;
  }
  return std::make_shared<Work>(*this, std::move(events), seq);
}

std::shared_ptr<CommWork> NcclComm::allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                    std::optional<CudaStream> producer) {
  return launch("allreduce", count * dtype_size(dtype), producer, [&] {
    check(ncclAllReduce(buffer, buffer, count, to_nccl(dtype), to_nccl(op), handles_->comm, handles_->stream),
          "ncclAllReduce");
  });
}

std::shared_ptr<CommWork> NcclComm::reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                         std::optional<CudaStream> producer) {
  const std::size_t bytes = count * dtype_size(dtype);
  return launch("reduce_scatter", bytes * static_cast<std::size_t>(size_), producer, [&] {
    // In place: NCCL's result lands in this rank's own chunk of the buffer.
    void* mine = static_cast<char*>(buffer) + static_cast<std::size_t>(rank_) * bytes;
    check(ncclReduceScatter(buffer, mine, count, to_nccl(dtype), to_nccl(op), handles_->comm, handles_->stream),
          "ncclReduceScatter");
  });
}

std::shared_ptr<CommWork> NcclComm::broadcast_async(void* buffer, std::size_t count, DType dtype, int root,
                                                    std::optional<CudaStream> producer) {
  return launch("broadcast", count * dtype_size(dtype), producer, [&] {
    check(ncclBroadcast(buffer, buffer, count, to_nccl(dtype), root, handles_->comm, handles_->stream),
          "ncclBroadcast");
  });
}

std::shared_ptr<CommWork> NcclComm::allgather_async(const void* send, void* recv, std::size_t count, DType dtype,
                                                    std::optional<CudaStream> producer) {
  return launch("allgather", count * dtype_size(dtype), producer, [&] {
    check(ncclAllGather(send, recv, count, to_nccl(dtype), handles_->comm, handles_->stream), "ncclAllGather");
  });
}

void NcclComm::allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) {
  allreduce_async(buffer, count, dtype, op)->wait();
}

void NcclComm::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  broadcast_async(buffer, count, dtype, root)->wait();
}

void NcclComm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  allgather_async(send, recv, count, dtype)->wait();
}

void NcclComm::send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) {
  launch("sendrecv", bytes, std::nullopt, [&] {
    // One group: the send and the receive progress together (two ranks sending to each other first
    // would otherwise wait for each other).
    check(ncclGroupStart(), "ncclGroupStart");
    check(ncclSend(send, bytes, ncclUint8, to, handles_->comm, handles_->stream), "ncclSend");
    check(ncclRecv(recv, bytes, ncclUint8, from, handles_->comm, handles_->stream), "ncclRecv");
    check(ncclGroupEnd(), "ncclGroupEnd");
  })->wait();
}

void NcclComm::barrier() {
  // NCCL has no barrier: a one-element all-reduce that every rank must join.
  void* scratch = nullptr;
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  MNDDP_CUDA_CHECK(cudaMalloc(&scratch, sizeof(float)));
  MNDDP_CUDA_CHECK(cudaMemset(scratch, 0, sizeof(float)));
  try {
    allreduce(scratch, 1, DType::F32, ReduceOp::Sum);
  } catch (...) {
    cudaFree(scratch);
    throw;
  }
  MNDDP_CUDA_CHECK(cudaFree(scratch));
}

}  // namespace mnddp

#endif  // MNDDP_HAVE_NCCL
