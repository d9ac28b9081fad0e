// torch::Tensor adapters over Communicator.
#include "mnddp/comm/tensor_comm.hpp"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace mnddp {
namespace {

thread_local int t_tensor_calls = 0;

// While alive, calls on this thread come from a tensor adapter.
class TensorCall {
 public:
  TensorCall() { ++t_tensor_calls; }
  ~TensorCall() { --t_tensor_calls; }
  TensorCall(const TensorCall&) = delete;
  TensorCall& operator=(const TensorCall&) = delete;
};

// A tensor in the communicator's own memory: a device communicator takes CUDA tensors only.
void require_comm_memory(const Communicator& comm, const at::Tensor& tensor) {
  // Dense in any stride order (a channels-last weight): elementwise collectives over the same layout
  // on every rank.
  if (!tensor.is_non_overlapping_and_dense())
    throw std::invalid_argument("communicator: tensor must be dense (contiguous in some dimension order)");
  if (comm.uses_device_memory() && !tensor.is_cuda())
    throw std::invalid_argument(fmt::format("communicator {}: a {} tensor is not in device memory (internal error)",
                                            comm.backend_name(), tensor.device().str()));
}

// Runs `op` on the tensor itself when it is in the communicator's memory, else (a CUDA tensor on a
// host communicator) on a host copy that is copied back.
template <typename Op>
void in_comm_memory(Communicator& comm, at::Tensor& tensor, Op&& op) {
  require_comm_memory(comm, tensor);
  const TensorCall marked;
  if (comm.uses_device_memory() || tensor.device().is_cpu()) {
    op(tensor);
    return;
  }
  at::Tensor staged = tensor.to(at::kCPU);
  op(staged);
  tensor.copy_(staged);
}

}  // namespace

bool inside_tensor_call() { return t_tensor_calls > 0; }

// DType <-> torch, both ways from one table (indexed like kDTypes). torch's bool travels as uint8.
constexpr std::array<c10::ScalarType, kDTypes.size()> kTorchTypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                                                     at::kInt,   at::kLong,   at::kByte};

DType to_comm_dtype(c10::ScalarType type) {
  if (type == at::kBool) return DType::U8;
  for (const auto& info : kDTypes)
    if (kTorchTypes[static_cast<std::size_t>(info.dtype)] == type) return info.dtype;
  throw std::invalid_argument(fmt::format("communicator: unsupported tensor dtype {}", c10::toString(type)));
}

c10::ScalarType to_scalar_type(DType dtype) { return kTorchTypes[static_cast<std::size_t>(dtype)]; }

void allreduce(Communicator& comm, at::Tensor& tensor, ReduceOp op) {
  in_comm_memory(comm, tensor, [&](at::Tensor& t) {
    comm.allreduce(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), op);
  });
}

void broadcast(Communicator& comm, at::Tensor& tensor, int root) {
  in_comm_memory(comm, tensor, [&](at::Tensor& t) {
    comm.broadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), root);
  });
}

std::shared_ptr<CommWork> allreduce_async(Communicator& comm, at::Tensor& tensor, ReduceOp op, void* producer_stream) {
  require_comm_memory(comm, tensor);
  if (!comm.uses_device_memory() && !tensor.device().is_cpu())
    throw std::invalid_argument("communicator: an asynchronous all-reduce on a host communicator needs a CPU tensor");
  const TensorCall marked;
  return comm.allreduce_async(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                              to_comm_dtype(tensor.scalar_type()), op, producer_stream);
}

namespace {

std::size_t chunk_of(const Communicator& comm, const at::Tensor& tensor) {
  if (tensor.numel() % comm.size() != 0)
    throw std::invalid_argument(
        fmt::format("communicator: {} elements do not split into {} equal chunks", tensor.numel(), comm.size()));
  return static_cast<std::size_t>(tensor.numel() / comm.size());
}

}  // namespace

std::shared_ptr<CommWork> reduce_scatter_async(Communicator& comm, at::Tensor& tensor, ReduceOp op,
                                               void* producer_stream) {
  require_comm_memory(comm, tensor);
  if (!comm.uses_device_memory() && !tensor.device().is_cpu())
    throw std::invalid_argument(
        "communicator: an asynchronous reduce-scatter on a host communicator needs a CPU tensor");
  const TensorCall marked;
  return comm.reduce_scatter_async(tensor.data_ptr(), chunk_of(comm, tensor), to_comm_dtype(tensor.scalar_type()), op,
                                   producer_stream);
}

void allgather_in_place(Communicator& comm, at::Tensor& tensor) {
  const std::size_t chunk = chunk_of(comm, tensor);
  in_comm_memory(comm, tensor, [&](at::Tensor& t) {
    auto* base = static_cast<char*>(t.data_ptr());
    const std::size_t bytes = chunk * t.element_size();
    comm.allgather(base + static_cast<std::size_t>(comm.rank()) * bytes, base, chunk, to_comm_dtype(t.scalar_type()));
  });
}

void* current_stream_of(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return nullptr;
  return c10::impl::getDeviceGuardImpl(c10::kCUDA)->getStream(tensor.device()).native_handle();
}

}  // namespace mnddp
