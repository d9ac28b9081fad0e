// Which communicator carries the gradients, and building it. Two planes: the control plane (strings,
// agreement, metrics, signatures, checkpoint I/O) is always the MPI communicator; the gradient plane
// is NCCL when no two ranks share a GPU, else that same MPI communicator. The decision compares
// the ranks' GPUs by identity (host and PCI bus id), not by counting visible devices: under
// `srun --gpus-per-task=1` or one-GPU containers every rank sees one device, each a different one.
// NCCL is built here with its abort hook (Runtime::abort_all) and its health check (the watchdog
// polls NCCL's asynchronous errors) registered together, and both go away with it. Torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/env_info.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

// One rank's GPU as NCCL tells GPUs apart: the host (NCCL_HOSTID where it is set, which NCCL's own
// duplicate check reads instead of the host name) and the device's PCI bus id. `device` is empty for
// a rank without a GPU.
struct DeviceIdentity {
  std::string host;
  std::string device;
};

// This rank's identity; `cuda_device` < 0 for a rank without a GPU.
DeviceIdentity device_identity(int cuda_device, const std::string& host_name, const Environment& env);

// What carries the gradients, and why in words (for the log).
struct BackendChoice {
  Backend backend = Backend::Mpi;
  std::string reason;
};

// The decision from every rank's identity (rank r at index r). Auto: NCCL when the build has it,
// every rank has a GPU and no two ranks share one; else MPI, with the first obstacle as the reason.
// --backend nccl: throws UsageError naming the obstacle (both ranks of a shared GPU).
BackendChoice decide_gradient_backend(Backend requested, const std::vector<DeviceIdentity>& ranks, bool have_nccl);

// Collective over `control`: gathers every rank's identity and decides (the same on every rank);
// logs the choice and its reason at info level on rank 0. Throws UsageError (agreed) when --backend
// nccl cannot be met, or when NCCL is chosen but this process loaded another libnccl than mnddp's.
Backend select_gradient_backend(Backend requested, int cuda_device, const RankInfo& rank, Communicator& control);

// Collective over `control`. Nccl: a new NCCL communicator on `cuda_device` (`timeout_s` bounds its
// initialisation). Mpi: `control` itself (not owned), which then carries both planes.
std::shared_ptr<Communicator> make_gradient_comm(Backend chosen, Communicator& control, int cuda_device,
                                                 double timeout_s);

}  // namespace mnddp
