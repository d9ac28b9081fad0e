// Thin adapters from torch tensors to the Communicator's typed buffers: the only way tensors reach a
// communicator. A device communicator (NCCL) gets the CUDA tensor's own pointer and refuses a host
// tensor (a host pointer handed to NCCL is undefined behaviour); a host communicator (MPI) gets CPU
// tensors directly and CUDA tensors staged through host memory.
#pragma once

#include <ATen/core/Tensor.h>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

DType to_comm_dtype(c10::ScalarType type);    // throws for types the communicator cannot move
c10::ScalarType to_scalar_type(DType dtype);  // the inverse (U8 -> uint8)

// In place; `tensor` must be dense. Ordered like torch's own operations: on a device communicator
// the collective is queued after the work on torch's current stream, and that stream waits for it
// on the GPU, so the host goes on (no host wait; a later .item() or copy is ordered after it). On a
// host communicator they block, CUDA tensors staged through host memory.
void allreduce(Communicator& comm, at::Tensor& tensor, ReduceOp op);
void broadcast(Communicator& comm, at::Tensor& tensor, int root);
// In place: `tensor` holds size() equal chunks; every rank's own chunk reaches every rank.
void allgather_in_place(Communicator& comm, at::Tensor& tensor);

// Starts an in-place all-reduce of `tensor`, which must live in the communicator's memory (CPU for a
// host communicator, CUDA for a device one): nothing can be staged while it is in flight.
// `producer`: the stream whose queued work writes the tensor (current_stream_of); a host tensor that
// device-to-host copies on a stream fill asynchronously names that stream.
std::shared_ptr<CommWork> allreduce_async(Communicator& comm, at::Tensor& tensor, ReduceOp op,
                                          std::optional<CudaStream> producer = std::nullopt);
// Starts an in-place reduce-scatter of `tensor` (size() equal chunks, in the communicator's memory,
// like allreduce_async): chunk r ends holding op over every rank's chunk r on rank r.
std::shared_ptr<CommWork> reduce_scatter_async(Communicator& comm, at::Tensor& tensor, ReduceOp op,
                                               std::optional<CudaStream> producer = std::nullopt);
// Starts a broadcast of `tensor` from `root` (in the communicator's memory).
std::shared_ptr<CommWork> broadcast_async(Communicator& comm, at::Tensor& tensor, int root,
                                          std::optional<CudaStream> producer = std::nullopt);

// torch's current stream on a CUDA tensor's device, for ordering a collective after the work queued
// there (producer) or making the stream wait for it (consumer); nothing for a host tensor. Through
// c10's device-generic interface: the torch half links no CUDA library itself.
std::optional<CudaStream> current_stream_of(const at::Tensor& tensor);
// Waits for `work` where its result is next used: `consumer` waits on the GPU where there is one
// (current_stream_of of the tensor that reads it), else the host waits.
void wait_for(CommWork& work, std::optional<CudaStream> consumer);

// Marks the calls made by these adapters, so that a test can tell tensor traffic from raw (control)
// messages on a communicator (tests/mpi/test_control_plane.cpp).
bool inside_tensor_call();

}  // namespace mnddp
