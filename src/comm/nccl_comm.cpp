// NcclComm: NCCL bootstrapped over MPI, non-blocking init and collectives, a dedicated comm stream
// fenced with CUDA events, asynchronous-error polling and abort.
#include "mnddp/comm/nccl_comm.hpp"

#if MNDDP_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <source_location>
#include <thread>

#include "mnddp/comm/nccl_check.hpp"
#include "mnddp/cuda_check.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

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

// Polls between checks of a non-blocking NCCL call that is still in progress.
constexpr auto kNcclPoll = std::chrono::microseconds(50);

}  // namespace

struct NcclComm::Handles {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // high priority, non-blocking: never serialised with torch's streams

  // Checks a NCCL result; with a non-blocking communicator an enqueue may report ncclInProgress,
  // which is resolved by polling the communicator's state.
  void check(ncclResult_t rc, const char* call, std::source_location where = std::source_location::current()) {
    while (rc == ncclInProgress) {
      std::this_thread::sleep_for(kNcclPoll);
      ncclCommGetAsyncError(comm, &rc);
    }
    if (rc != ncclSuccess) check_nccl(rc, call, comm != nullptr ? ncclGetLastError(comm) : nullptr, where);
  }
};

#define MNDDP_NCCL_CHECK(call) handles_->check((call), #call)

namespace {

// An event shared by the work object and the watchdog's completion probe (whichever lives longer).
struct SharedEvent {
  cudaEvent_t event = nullptr;
  std::atomic<bool> recorded{false};
  SharedEvent() { MNDDP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
  ~SharedEvent() { cudaEventDestroy(event); }
  SharedEvent(const SharedEvent&) = delete;
  SharedEvent& operator=(const SharedEvent&) = delete;
  void record(cudaStream_t stream) {
    MNDDP_CUDA_CHECK(cudaEventRecord(event, stream));
    recorded.store(true);
  }
  bool done() const { return recorded.load() && cudaEventQuery(event) == cudaSuccess; }
};

// Completion of one collective: an event recorded on the comm stream after it.
class NcclWork final : public CommWork {
 public:
  NcclWork(NcclComm& comm, std::shared_ptr<SharedEvent> done, std::function<void()> on_complete)
      : comm_(comm), done_(std::move(done)), on_complete_(std::move(on_complete)) {}
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  void wait(void* consumer_stream) override {
    comm_.check_async_error();
    if (consumer_stream != nullptr) {
      // The consumer's later work waits on the GPU; the host goes on (the watchdog sees the end).
      MNDDP_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer_stream), done_->event, 0));
      return;
    }
    // Host wait, polled so that an asynchronous NCCL error is seen instead of blocking forever.
    while (true) {
      const cudaError_t state = cudaEventQuery(done_->event);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaEventQuery");
      comm_.check_async_error();
      std::this_thread::sleep_for(kNcclPoll);
    }
    on_complete_();
  }
  bool is_completed() override { return done_->done(); }

 private:
  NcclComm& comm_;
  std::shared_ptr<SharedEvent> done_;
  std::function<void()> on_complete_;
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

NcclComm::NcclComm(Communicator& bootstrap, int device, double init_timeout_s)
    : handles_(std::make_unique<Handles>()), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  int least = 0;
  int greatest = 0;
  MNDDP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MNDDP_CUDA_CHECK(cudaStreamCreateWithPriority(&handles_->stream, cudaStreamNonBlocking, greatest));

  // Rank 0 makes the id; MPI carries it to everyone.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (bootstrap.is_root()) MNDDP_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof(id), DType::U8, 0);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return at once; failures and hangs stay abortable
  ncclResult_t rc = ncclCommInitRankConfig(&handles_->comm, size_, id, rank_, &config);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(init_timeout_s);
  while (rc == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(handles_->comm);
      handles_->comm = nullptr;
      throw Error(
          fmt::format("NCCL: ncclCommInitRankConfig did not finish within {} s on rank {} (device {}); "
                      "check that every rank reached start-up and that the network is usable (NCCL_DEBUG=INFO)",
                      init_timeout_s, rank_, device_));
    }
    std::this_thread::sleep_for(kNcclPoll);
    ncclCommGetAsyncError(handles_->comm, &rc);
  }
  MNDDP_NCCL_CHECK(rc);
}

std::optional<std::string> NcclComm::async_error() {
  if (aborted_.load()) return std::nullopt;  // aborted on purpose: the abort path reports why
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(handles_->comm, &state);
  if (state == ncclSuccess || state == ncclInProgress) return std::nullopt;
  const char* last = ncclGetLastError(handles_->comm);
  return fmt::format("NCCL reported an asynchronous error on rank {} (device {}): {}{}{}", rank_, device_,
                     ncclGetErrorString(state), last && *last ? ": " : "", last ? last : "");
}

NcclComm::~NcclComm() {
  if (handles_->comm != nullptr && !aborted_.load()) {
    // Finalize flushes outstanding work (polled, bounded); if it cannot, abort instead of hanging.
    ncclResult_t state = ncclCommFinalize(handles_->comm);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
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
  ncclCommAbort(handles_->comm);
}

void NcclComm::check_async_error() {
  // An aborted communicator is freed: never poll it again.
  if (aborted_.load()) throw Error(fmt::format("NCCL: the communicator of rank {} was aborted", rank_));
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(handles_->comm, &state);
  if (state != ncclSuccess && state != ncclInProgress) MNDDP_NCCL_CHECK(state);
}

std::uint64_t NcclComm::track(const char* op, std::size_t bytes, std::function<bool()> done) {
  ++collectives_;
  return tracker_.begin(op, bytes, std::nullopt, std::move(done));
}

std::shared_ptr<CommWork> NcclComm::allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                    void* producer_stream) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  auto done = std::make_shared<SharedEvent>();
  const std::uint64_t seq = track("allreduce", count * dtype_size(dtype), [done] { return done->done(); });
  fence(static_cast<cudaStream_t>(producer_stream), handles_->stream);
  MNDDP_NCCL_CHECK(ncclAllReduce(buffer, buffer, count, to_nccl(dtype), to_nccl(op), handles_->comm, handles_->stream));
  done->record(handles_->stream);
  return std::make_shared<NcclWork>(*this, done, [this, seq] { tracker_.end(seq); });
}

std::shared_ptr<CommWork> NcclComm::reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                         void* producer_stream) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  auto done = std::make_shared<SharedEvent>();
  const std::size_t bytes = count * dtype_size(dtype);
  const std::uint64_t seq =
      track("reduce_scatter", bytes * static_cast<std::size_t>(size_), [done] { return done->done(); });
  fence(static_cast<cudaStream_t>(producer_stream), handles_->stream);
  // In place: NCCL's result lands in this rank's own chunk of the buffer.
  void* mine = static_cast<char*>(buffer) + static_cast<std::size_t>(rank_) * bytes;
  MNDDP_NCCL_CHECK(
      ncclReduceScatter(buffer, mine, count, to_nccl(dtype), to_nccl(op), handles_->comm, handles_->stream));
  done->record(handles_->stream);
  return std::make_shared<NcclWork>(*this, done, [this, seq] { tracker_.end(seq); });
}

void NcclComm::allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) {
  allreduce_async(buffer, count, dtype, op, nullptr)->wait(nullptr);
}

void NcclComm::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  auto done = std::make_shared<SharedEvent>();
  const CollectiveScope scope(tracker_, "broadcast", count * dtype_size(dtype));
  ++collectives_;
  fence(nullptr, handles_->stream);
  MNDDP_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, to_nccl(dtype), root, handles_->comm, handles_->stream));
  done->record(handles_->stream);
  NcclWork(*this, done, [] {}).wait(nullptr);
}

void NcclComm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  auto done = std::make_shared<SharedEvent>();
  const CollectiveScope scope(tracker_, "allgather", count * dtype_size(dtype));
  ++collectives_;
  fence(nullptr, handles_->stream);
  MNDDP_NCCL_CHECK(ncclAllGather(send, recv, count, to_nccl(dtype), handles_->comm, handles_->stream));
  done->record(handles_->stream);
  NcclWork(*this, done, [] {}).wait(nullptr);
}

void NcclComm::send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) {
  MNDDP_CUDA_CHECK(cudaSetDevice(device_));
  auto done = std::make_shared<SharedEvent>();
  const CollectiveScope scope(tracker_, "sendrecv", bytes);
  ++collectives_;
  fence(nullptr, handles_->stream);
  // One group: the send and the receive progress together (two ranks sending to each other first
  // would otherwise wait for each other).
  MNDDP_NCCL_CHECK(ncclGroupStart());
  MNDDP_NCCL_CHECK(ncclSend(send, bytes, ncclUint8, to, handles_->comm, handles_->stream));
  MNDDP_NCCL_CHECK(ncclRecv(recv, bytes, ncclUint8, from, handles_->comm, handles_->stream));
  MNDDP_NCCL_CHECK(ncclGroupEnd());
  done->record(handles_->stream);
  NcclWork(*this, done, [] {}).wait(nullptr);
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
