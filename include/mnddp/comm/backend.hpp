// Which communicator carries the gradients, and building it. Two planes: the control plane (strings,
// agreement, metrics, signatures, checkpoint I/O) is always the MPI communicator; the gradient plane
// is NCCL when every rank has a GPU of its own, else that same MPI communicator. NCCL is built here
// with its abort hook (Runtime::abort_all) and its health check (the watchdog polls NCCL's
// asynchronous errors) registered together, and both go away with it. Torch-free.
#pragma once

#include <memory>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

// Collective over `control`: Backend::Nccl or Backend::Mpi, the same on every rank. Auto picks NCCL
// when every rank has a GPU (`cuda_device` >= 0) of its own among `visible_gpus` and the build has
// NCCL. Throws UsageError (agreed) when --backend nccl cannot be met.
Backend select_gradient_backend(Backend requested, int cuda_device, int visible_gpus, const RankInfo& rank,
                                Communicator& control);

// Collective over `control`. Nccl: a new NCCL communicator on `cuda_device` (`timeout_s` bounds its
// initialisation). Mpi: `control` itself (not owned), which then carries both planes.
std::shared_ptr<Communicator> make_gradient_comm(Backend chosen, Communicator& control, int cuda_device,
                                                 double timeout_s);

}  // namespace mnddp
