// Device and thread binding for one rank: local_rank % visible GPUs (the safe choice when a
// launcher leaves every task seeing only device 0), and the torch thread count. Which communicator
// carries gradients is comm/backend.hpp.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "mnddp/choices.hpp"
#include "mnddp/env_info.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  int visible_gpus = 0;     // CUDA devices this rank sees
  std::string description;  // "cpu" or "cuda:1 of 2 visible (CUDA_VISIBLE_DEVICES=0,1)"
  int cuda_index() const { return device.is_cuda() ? device.index() : -1; }
};

// Throws UsageError for --device cuda without a visible GPU. Records the choice for every thread
// (device_binding.hpp) and binds it on the calling one.
DeviceChoice select_device(DeviceRequest requested, const RankInfo& rank);

// --threads 0: SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else cores / ranks on this node.
int resolve_threads(int requested, const RankInfo& rank, const Environment& env);
// True when the rank has a core for its torch threads and one more (its communication thread): then
// polling hand-offs cost no one anything. The rank's cores: SLURM_CPUS_PER_TASK, else cores / ranks
// on this node.
bool spare_core_per_rank(int torch_threads, const RankInfo& rank, const Environment& env);

// Sets torch's threads for the run (returned: --threads resolved) and whether the rank's channel
// threads may poll; under --deterministic, matrix products that do not depend on the thread count.
int configure_threads(int requested, bool deterministic, const RankInfo& rank);

// --loader-threads 0: the rank's cores (SLURM_CPUS_PER_TASK, else cores / ranks on this node) less
// `torch_threads`, at least 1.
int resolve_loader_threads(int requested, int torch_threads, const RankInfo& rank, const Environment& env);

}  // namespace mnddp
