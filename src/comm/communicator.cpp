// Typed helpers over the Communicator interface, and the collective failure agreement.
#include "mnddp/comm/communicator.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace mnddp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "unknown";
}

void Communicator::send_receive(const void*, int, void*, int, std::size_t) {
  throw std::logic_error("send_receive: not supported by the " + backend_name() + " communicator");
}

namespace {

// Work that was complete when it was made: a host backend's blocking call behind an async one.
class CompletedWork final : public CommWork {
 public:
  void wait() override {}
  void wait_on(CudaStream) override {}
  bool is_completed() override { return true; }
};

}  // namespace

std::shared_ptr<CommWork> Communicator::broadcast_async(void* buffer, std::size_t count, DType dtype, int root,
                                                        std::optional<CudaStream> producer) {
  if (producer) throw std::logic_error("broadcast_async: the " + backend_name() + " communicator orders no streams");
  broadcast(buffer, count, dtype, root);
  return std::make_shared<CompletedWork>();
}

std::shared_ptr<CommWork> Communicator::allgather_async(const void* send, void* recv, std::size_t count, DType dtype,
                                                        std::optional<CudaStream> producer) {
  if (producer) throw std::logic_error("allgather_async: the " + backend_name() + " communicator orders no streams");
  allgather(send, recv, count, dtype);
  return std::make_shared<CompletedWork>();
}

void require_host_comm(const Communicator& comm, const char* what) {
  if (comm.uses_device_memory())
    throw std::logic_error(std::string(what) + ": a control message needs a host communicator, not " +
                           comm.backend_name() + " (pass the MPI control communicator)");
}

void broadcast_string(Communicator& comm, std::string& text, int root) {
  require_host_comm(comm, "broadcast_string");
  std::int64_t length = static_cast<std::int64_t>(text.size());
  comm.broadcast(&length, 1, DType::I64, root);
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) comm.broadcast(text.data(), text.size(), DType::U8, root);
}

namespace {
template <typename T>
T reduce_scalar(Communicator& comm, T value, DType dtype, ReduceOp op) {
  require_host_comm(comm, "a scalar all-reduce");
  comm.allreduce(&value, 1, dtype, op);
  return value;
}
}  // namespace

std::int64_t allreduce_sum(Communicator& comm, std::int64_t value) {
  return reduce_scalar(comm, value, DType::I64, ReduceOp::Sum);
}
std::int64_t allreduce_max(Communicator& comm, std::int64_t value) {
  return reduce_scalar(comm, value, DType::I64, ReduceOp::Max);
}
std::int64_t allreduce_min(Communicator& comm, std::int64_t value) {
  return reduce_scalar(comm, value, DType::I64, ReduceOp::Min);
}
double allreduce_sum(Communicator& comm, double value) { return reduce_scalar(comm, value, DType::F64, ReduceOp::Sum); }

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine) {
  require_host_comm(comm, "allgather_strings");
  const auto n = static_cast<std::size_t>(comm.size());
  std::int64_t my_length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(n);
  comm.allgather(&my_length, lengths.data(), 1, DType::I64);
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * n, '\0');
  if (longest > 0) comm.allgather(padded.data(), all.data(), longest, DType::U8);
  std::vector<std::string> out(n);
  for (std::size_t r = 0; r < n; ++r) out[r] = all.substr(r * longest, static_cast<std::size_t>(lengths[r]));
  return out;
}

void agree_on_failure(Communicator& comm, const std::optional<Failure>& mine) {
  require_host_comm(comm, "agree_on_failure");
  const std::int64_t none = std::numeric_limits<std::int64_t>::max();
  const std::int64_t first_failed = allreduce_min(comm, mine ? comm.rank() : none);
  if (first_failed == none) return;
  const int owner = static_cast<int>(first_failed);
  std::string message = mine ? mine->message : std::string();
  std::int64_t exit_code = mine ? mine->exit_code : kExitFailure;
  broadcast_string(comm, message, owner);
  comm.broadcast(&exit_code, 1, DType::I64, owner);
  throw Error(message, static_cast<int>(exit_code), /*collective=*/true);
}

}  // namespace mnddp
