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

// Runs `op` on a host copy of a CUDA tensor (a host communicator), copied back after.
template <typename Op>
void staged(at::Tensor& tensor, Op&& op) {
  at::Tensor host = tensor.to(at::kCPU);
  op(host);
  tensor.copy_(host);
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
  require_comm_memory(comm, tensor);
  const TensorCall marked;
  if (comm.uses_device_memory()) {
    const auto stream = current_stream_of(tensor);
    return wait_for(*comm.allreduce_async(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                                          to_comm_dtype(tensor.scalar_type()), op, stream),
                    stream);
  }
  auto run = [&](at::Tensor& t) {
    comm.allreduce(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), op);
  };
  tensor.is_cpu() ? run(tensor) : staged(tensor, run);
}

void broadcast(Communicator& comm, at::Tensor& tensor, int root) {
  require_comm_memory(comm, tensor);
  const TensorCall marked;
  if (comm.uses_device_memory())
    return wait_for(*broadcast_async(comm, tensor, root, current_stream_of(tensor)), current_stream_of(tensor));
  auto run = [&](at::Tensor& t) {
    comm.broadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), root);
  };
  tensor.is_cpu() ? run(tensor) : staged(tensor, run);
}

namespace {

std::size_t chunk_of(const Communicator& comm, const at::Tensor& tensor) {
  if (tensor.numel() % comm.size() != 0)
    throw std::invalid_argument(
        fmt::format("communicator: {} elements do not split into {} equal chunks", tensor.numel(), comm.size()));
  return static_cast<std::size_t>(tensor.numel() / comm.size());
}

// An asynchronous collective takes the tensor itself: in the communicator's memory, or a host tensor
// on a host communicator.
void require_async_memory(const Communicator& comm, const at::Tensor& tensor, const char* what) {
  require_comm_memory(comm, tensor);
  if (!comm.uses_device_memory() && !tensor.device().is_cpu())
    throw std::invalid_argument(
        fmt::format("communicator: an asynchronous {} on a host communicator needs a CPU tensor", what));
}

}  // namespace

void allgather_in_place(Communicator& comm, at::Tensor& tensor) {
  const std::size_t chunk = chunk_of(comm, tensor);
  require_comm_memory(comm, tensor);
  const TensorCall marked;
  auto run = [&](at::Tensor& t, std::optional<CudaStream> stream) {
    auto* base = static_cast<char*>(t.data_ptr());
    const std::size_t bytes = chunk * t.element_size();
    const void* mine = base + static_cast<std::size_t>(comm.rank()) * bytes;
    if (!comm.uses_device_memory()) return comm.allgather(mine, base, chunk, to_comm_dtype(t.scalar_type()));
    wait_for(*comm.allgather_async(mine, base, chunk, to_comm_dtype(t.scalar_type()), stream), stream);
  };
  if (comm.uses_device_memory() || tensor.is_cpu()) return run(tensor, current_stream_of(tensor));
  staged(tensor, [&](at::Tensor& host) { run(host, std::nullopt); });
}

std::shared_ptr<CommWork> allreduce_async(Communicator& comm, at::Tensor& tensor, ReduceOp op,
                                          std::optional<CudaStream> producer) {
  require_async_memory(comm, tensor, "all-reduce");
  const TensorCall marked;
  return comm.allreduce_async(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                              to_comm_dtype(tensor.scalar_type()), op, producer);
}

std::shared_ptr<CommWork> reduce_scatter_async(Communicator& comm, at::Tensor& tensor, ReduceOp op,
                                               std::optional<CudaStream> producer) {
  require_async_memory(comm, tensor, "reduce-scatter");
  const TensorCall marked;
  return comm.reduce_scatter_async(tensor.data_ptr(), chunk_of(comm, tensor), to_comm_dtype(tensor.scalar_type()), op,
                                   producer);
}

std::shared_ptr<CommWork> broadcast_async(Communicator& comm, at::Tensor& tensor, int root,
                                          std::optional<CudaStream> producer) {
  require_async_memory(comm, tensor, "broadcast");
  const TensorCall marked;
  return comm.broadcast_async(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                              to_comm_dtype(tensor.scalar_type()), root, producer);
}

std::optional<CudaStream> current_stream_of(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return std::nullopt;
  return CudaStream{c10::impl::getDeviceGuardImpl(c10::kCUDA)->getStream(tensor.device()).native_handle()};
}

void wait_for(CommWork& work, std::optional<CudaStream> consumer) {
  if (consumer) return work.wait_on(*consumer);
  work.wait();
}

}  // namespace mnddp
