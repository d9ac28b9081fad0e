// torch::Tensor adapters over Communicator.
#include "mnddp/comm/tensor_comm.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <stdexcept>

namespace mnddp {
namespace {

// Runs `op` on a host-visible contiguous copy when the tensor lives on a device, then copies back.
template <typename Op>
void on_host(at::Tensor& tensor, Op&& op) {
  if (!tensor.is_contiguous()) throw std::invalid_argument("communicator: tensor must be contiguous");
  if (tensor.device().is_cpu()) {
    op(tensor);
    return;
  }
  at::Tensor staged = tensor.to(at::kCPU);
  op(staged);
  tensor.copy_(staged);
}

}  // namespace

DType to_comm_dtype(c10::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return DType::F32;
    case at::kDouble:
      return DType::F64;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    case at::kInt:
      return DType::I32;
    case at::kLong:
      return DType::I64;
    case at::kByte:
      return DType::U8;
    case at::kBool:
      return DType::U8;
    default:
      throw std::invalid_argument(fmt::format("communicator: unsupported tensor dtype {}", c10::toString(type)));
  }
}

c10::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return at::kFloat;
    case DType::F64:
      return at::kDouble;
    case DType::F16:
      return at::kHalf;
    case DType::BF16:
      return at::kBFloat16;
    case DType::I32:
      return at::kInt;
    case DType::I64:
      return at::kLong;
    case DType::U8:
      return at::kByte;
  }
  throw std::invalid_argument("to_scalar_type: unknown dtype");
}

void allreduce(Communicator& comm, at::Tensor& tensor, ReduceOp op) {
  on_host(tensor, [&](at::Tensor& t) {
    comm.allreduce(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), op);
  });
}

void broadcast(Communicator& comm, at::Tensor& tensor, int root) {
  on_host(tensor, [&](at::Tensor& t) {
    comm.broadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()), to_comm_dtype(t.scalar_type()), root);
  });
}

}  // namespace mnddp
