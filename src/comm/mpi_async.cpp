// The MPI backend's asynchronous channel: FIFO start, polled progress, completion by condition
// variable.
#include "mpi_async.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <vector>

#include "mnddp/check.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mpi_ops.hpp"

namespace mnddp::mpi_detail {
namespace {

// How long the channel sleeps between polls while collectives are in flight. Short enough to add
// little latency per algorithm round, long enough that polling costs a few percent of a core.
constexpr auto kPollInterval = std::chrono::microseconds(20);

}  // namespace

struct AsyncChannel::Op {
  void* buffer = nullptr;
  std::size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  std::vector<MPI_Request> requests;  // one per chunk of at most kMaxChunk elements

  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;

  void complete(std::exception_ptr failure = nullptr) {
    std::lock_guard lock(mutex);
    error = failure;
    done = true;
    finished.notify_all();
  }
};

namespace {

class MpiWork final : public CommWork {
 public:
  explicit MpiWork(std::shared_ptr<AsyncChannel::Op> op) : op_(std::move(op)) {}
  void wait(void*) override {
    std::unique_lock lock(op_->mutex);
    op_->finished.wait(lock, [&] { return op_->done; });
    if (op_->error) std::rethrow_exception(op_->error);
  }
  bool is_completed() override {
    std::lock_guard lock(op_->mutex);
    return op_->done;
  }

 private:
  std::shared_ptr<AsyncChannel::Op> op_;
};

}  // namespace

AsyncChannel::AsyncChannel(MPI_Comm parent) {
  MNDDP_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  MNDDP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MNDDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  thread_ = std::thread([this] { run(); });
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

std::shared_ptr<CommWork> AsyncChannel::allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) {
  check_reducible(dtype, op);
  auto queued = std::make_shared<Op>();
  queued->buffer = buffer;
  queued->count = count;
  queued->dtype = dtype;
  queued->op = op;
  {
    std::lock_guard lock(mutex_);
    queued_.push_back(queued);
  }
  wake_.notify_all();
  return std::make_shared<MpiWork>(queued);
}

bool AsyncChannel::start(Op& op) {
  try {
    auto* bytes = static_cast<char*>(op.buffer);
    const std::size_t element = dtype_size(op.dtype);
    for (std::size_t done = 0; done < op.count; done += kMaxChunk) {
      const std::size_t n = std::min(kMaxChunk, op.count - done);
      MPI_Request request = MPI_REQUEST_NULL;
      MNDDP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, bytes + done * element, static_cast<int>(n), to_mpi(op.dtype),
                                     reduce_op(op.op, op.dtype), comm_, &request));
      op.requests.push_back(request);
    }
    return true;
  } catch (...) {
    op.complete(std::current_exception());
    return false;
  }
}

bool AsyncChannel::progress(Op& op) {
  try {
    int flag = 0;
    MNDDP_MPI_CHECK(MPI_Testall(static_cast<int>(op.requests.size()), op.requests.data(), &flag, MPI_STATUSES_IGNORE));
    if (!flag) return false;
    if (op.op == ReduceOp::Avg && size_ > 1) divide_in_place(op.buffer, op.count, op.dtype, size_);
    op.complete();
  } catch (...) {
    op.complete(std::current_exception());
  }
  return true;
}

void AsyncChannel::run() {
  std::deque<std::shared_ptr<Op>> in_flight;
  while (true) {
    std::deque<std::shared_ptr<Op>> fresh;
    {
      std::unique_lock lock(mutex_);
      if (in_flight.empty()) wake_.wait(lock, [&] { return stop_ || !queued_.empty(); });
      if (stop_ && queued_.empty() && in_flight.empty()) return;
      fresh.swap(queued_);
    }
    // Start in submission order: every rank submits the same sequence, so the collectives match.
    for (auto& op : fresh)
      if (start(*op)) in_flight.push_back(op);
    bool any_finished = false;
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (progress(**it)) {
        it = in_flight.erase(it);
        any_finished = true;
      } else {
        ++it;
      }
    }
    if (!in_flight.empty() && !any_finished) std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace mnddp::mpi_detail
