// Device and thread binding for one rank: local_rank % visible GPUs (the safe choice when a
// launcher leaves every task seeing only device 0), and the torch thread count.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/config.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string description;  // "cpu" or "cuda:1 (NVIDIA H200, CUDA_VISIBLE_DEVICES=0,1)"
};

// Throws UsageError for --device cuda without a visible GPU.
DeviceChoice select_device(const std::string& requested, const RankInfo& rank);

// --threads 0: SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else cores / ranks on this node.
int resolve_threads(int requested, const RankInfo& rank, const Environment& env);

// The backend that will carry gradients, "mpi" or "nccl", the same on every rank (collective over
// `world`). auto picks nccl when every rank has a GPU of its own and the build has NCCL. Throws
// UsageError when --backend nccl cannot be met.
std::string select_backend(const std::string& requested, const DeviceChoice& device, const RankInfo& rank,
                           Communicator& world);

// The communicator for gradients and parameters: a new NcclComm (its abort is registered with
// Runtime::abort_all) for "nccl", nullptr for "mpi" (use `world`).
std::shared_ptr<Communicator> make_gradient_comm(const std::string& backend, Communicator& world,
                                                 const DeviceChoice& device, double timeout_s);

}  // namespace mnddp
