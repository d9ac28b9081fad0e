// Thin adapters from torch tensors to the Communicator's typed buffers. CPU tensors go straight
// through; CUDA tensors on a host-only backend (MPI) are staged through host memory.
#pragma once

#include <ATen/core/Tensor.h>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

DType to_comm_dtype(c10::ScalarType type);    // throws for types the communicator cannot move
c10::ScalarType to_scalar_type(DType dtype);  // the inverse (U8 -> uint8)

// In place; `tensor` must be contiguous.
void allreduce(Communicator& comm, at::Tensor& tensor, ReduceOp op);
void broadcast(Communicator& comm, at::Tensor& tensor, int root);

}  // namespace mnddp
