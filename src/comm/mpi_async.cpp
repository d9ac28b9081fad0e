// The MPI backend's asynchronous channel: a FIFO of all-reduces executed by one thread, completion
// signalled through a condition variable.
#include "mpi_async.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>

#include "mnddp/check.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/guarded_thread.hpp"
#include "mnddp/host_waits.hpp"
#include "mnddp/observe/timeline.hpp"
#include "mpi_ops.hpp"

namespace mnddp::mpi_detail {

using Clock = std::chrono::steady_clock;

// Both sides of a hand-off poll for this long before sleeping on a condition variable: a futex
// wake-up costs tens of microseconds, which is visible next to a 1 ms all-reduce. Only where the
// node has a core for each channel thread (set_channel_spin): on a node whose cores the compute
// threads already fill, a polling thread takes its time from another rank's backward pass.
constexpr auto kSpin = std::chrono::microseconds(200);
std::atomic<bool> g_spin{true};

// Polls `ready` (with yields) for up to kSpin; true as soon as it holds.
template <typename Ready>
bool spin_until(Ready&& ready) {
  if (!g_spin.load(std::memory_order_relaxed)) return ready();
  const auto deadline = Clock::now() + kSpin;
  do {
    if (ready()) return true;
    std::this_thread::yield();
  } while (Clock::now() < deadline);
  return false;
}

struct AsyncChannel::Op {
  AsyncKind kind = AsyncKind::AllReduce;
  void* buffer = nullptr;
  std::size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  std::uint64_t seq = 0;  // in the channel's tracker
  std::string label;
  std::unique_ptr<HostFence> fence;  // the device copies that fill the buffer, when there are any

  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::atomic<bool> done_flag{false};  // the same as `done`, readable without the lock
  std::exception_ptr error;
  double busy_s = 0.0;

  void complete(double seconds, std::exception_ptr failure = nullptr) {
    std::lock_guard lock(mutex);
    busy_s = seconds;
    error = failure;
    done = true;
    done_flag.store(true, std::memory_order_release);
    finished.notify_all();
  }
};

namespace {

class MpiWork final : public CommWork {
 public:
  explicit MpiWork(std::shared_ptr<AsyncChannel::Op> op) : op_(std::move(op)) {}
  // A stream waits for host memory only by its host waiting: what it queues next may read the result.
  void wait_on(CudaStream) override {
    note_host_wait();
    wait();
  }
  void wait() override {
    spin_until([&] { return op_->done_flag.load(std::memory_order_acquire); });
    std::unique_lock lock(op_->mutex);
    op_->finished.wait(lock, [&] { return op_->done; });
    if (op_->error) std::rethrow_exception(op_->error);
  }
  bool is_completed() override {
    std::lock_guard lock(op_->mutex);
    return op_->done;
  }
  double busy_seconds() override {
    std::lock_guard lock(op_->mutex);
    return op_->busy_s;
  }

 private:
  std::shared_ptr<AsyncChannel::Op> op_;
};

}  // namespace

AsyncChannel::AsyncChannel(MPI_Comm parent, const std::string& name, ChannelPace pace)
    : tracker_(name, pace), check_{name} {
  MNDDP_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  MNDDP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MNDDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MNDDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  thread_ = guarded_thread("communication channel", [this] { run(); });
}

AsyncChannel::~AsyncChannel() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

namespace {

const char* kind_name(AsyncKind kind) { return kind == AsyncKind::AllReduce ? "allreduce" : "reduce_scatter"; }

}  // namespace

std::shared_ptr<CommWork> AsyncChannel::submit(AsyncKind kind, void* buffer, std::size_t count, DType dtype,
                                               ReduceOp op, std::optional<CudaStream> producer) {
  check_reducible(dtype, op);
  // MPI_Reduce_scatter_block takes an int count per rank, and implementations size the whole buffer
  // (count x ranks) in an int too.
  if (kind == AsyncKind::ReduceScatter && count * static_cast<std::size_t>(size_) > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(
        fmt::format("reduce-scatter of {} values over {} ranks exceeds MPI's int counts: a bucket this large needs "
                    "--zero 1 or the NCCL backend",
                    count * static_cast<std::size_t>(size_), size_));
  auto queued = std::make_shared<Op>();
  queued->kind = kind;
  queued->buffer = buffer;
  queued->count = count;
  queued->dtype = dtype;
  queued->op = op;
  queued->label = CollectiveLabel::current();
  if (producer) queued->fence = std::make_unique<HostFence>(*producer);
  {
    std::lock_guard lock(mutex_);
    // Numbered under the queue's lock: sequence numbers follow submission (= execution) order.
    const std::size_t elements = kind == AsyncKind::ReduceScatter ? count * static_cast<std::size_t>(size_) : count;
    queued->seq = tracker_.begin(kind_name(kind), elements * dtype_size(dtype), queued->label);
    // One rank: the sum or mean of one buffer is the buffer (and its one chunk). Completed here, with no hand-off to
    // the thread (whose wake-up and spin would cost more than the whole "collective").
    if (size_ == 1 && in_flight_ == 0 && !debug_collectives() && !broken_ && !queued->fence) {
      tracker_.end(queued->seq);
      queued->complete(0.0);
      return std::make_shared<MpiWork>(queued);
    }
    ++in_flight_;
    queued_.push_back(queued);
  }
  wake_.notify_all();
  return std::make_shared<MpiWork>(queued);
}

void AsyncChannel::execute(Op& op) {
  const timeline::ScopedSpan span(
      "comm", timeline::enabled() ? (op.label.empty() ? kind_name(op.kind) : op.label) + " (running)" : std::string());
  const auto start = Clock::now();
  try {
    if (broken_) std::rethrow_exception(broken_);
    if (op.fence) op.fence->wait();  // the device-to-host copies that fill the buffer
    if (debug_collectives()) check_.verify(comm_, op.seq, kind_name(op.kind), op.dtype, op.count, -1, op.label);
    auto* bytes = static_cast<char*>(op.buffer);
    const std::size_t element = dtype_size(op.dtype);
    if (op.kind == AsyncKind::ReduceScatter) {
      reduce_scatter(op, bytes + static_cast<std::size_t>(rank_) * op.count * element);
    } else {
      for (std::size_t done = 0; done < op.count; done += kMaxChunk) {
        const std::size_t n = std::min(kMaxChunk, op.count - done);
        MNDDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + done * element, static_cast<int>(n), to_mpi(op.dtype),
                                      reduce_op(op.op, op.dtype), comm_));
      }
      if (op.op == ReduceOp::Avg && size_ > 1) divide_in_place(op.buffer, op.count, op.dtype, size_);
    }
    tracker_.end(op.seq);
    op.complete(std::chrono::duration<double>(Clock::now() - start).count());
  } catch (...) {
    broken_ = std::current_exception();
    tracker_.end(op.seq);
    op.complete(std::chrono::duration<double>(Clock::now() - start).count(), broken_);
  }
}

// MPI_Reduce_scatter_block in place leaves this rank's chunk at the buffer's start; it is moved to
// the rank's own place (`mine`), where NCCL's in-place reduce-scatter leaves it.
void AsyncChannel::reduce_scatter(Op& op, char* mine) {
  MNDDP_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, op.buffer, static_cast<int>(op.count), to_mpi(op.dtype),
                                           reduce_op(op.op, op.dtype), comm_));
  if (op.op == ReduceOp::Avg && size_ > 1) divide_in_place(op.buffer, op.count, op.dtype, size_);
  if (mine != op.buffer) std::memcpy(mine, op.buffer, op.count * dtype_size(op.dtype));
}

void AsyncChannel::run() {
  timeline::name_this_thread(tracker_.channel() + " channel");
  while (true) {
    std::shared_ptr<Op> next;
    spin_until([&] {
      std::lock_guard lock(mutex_);
      return stop_ || !queued_.empty();
    });
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queued_.empty(); });
      if (queued_.empty()) return;  // stopping, and nothing left to run
      next = std::move(queued_.front());
      queued_.pop_front();
    }
    // Submission order is the same on every rank, so the collectives match.
    execute(*next);
    std::lock_guard lock(mutex_);
    --in_flight_;
  }
}

}  // namespace mnddp::mpi_detail

namespace mnddp {

void set_channel_spin(bool on) { mpi_detail::g_spin.store(on); }

}  // namespace mnddp
