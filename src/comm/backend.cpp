// Gradient backend selection and construction.
#include "mnddp/comm/backend.hpp"

#include <fmt/format.h>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/health_checks.hpp"
#include "mnddp/comm/nccl_comm.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

Backend select_gradient_backend(Backend requested, int cuda_device, int visible_gpus, const RankInfo& rank,
                                Communicator& control) {
  // Why this rank cannot use NCCL, if it cannot.
  std::string obstacle;
  if (!MNDDP_HAVE_NCCL) {
    obstacle = "this mnddp was built without NCCL";
  } else if (cuda_device < 0) {
    obstacle = fmt::format("{} has no GPU", rank.where());
  } else if (rank.local_size > visible_gpus) {
    obstacle = fmt::format("{} runs {} ranks on {} GPU(s), and NCCL needs one GPU per rank", rank.where(),
                           rank.local_size, visible_gpus);
  }
  const bool everyone_can = allreduce_min(control, obstacle.empty() ? 1 : 0) == 1;
  switch (requested) {
    case Backend::Mpi:
      return Backend::Mpi;
    case Backend::Auto:
      return everyone_can ? Backend::Nccl : Backend::Mpi;
    case Backend::Nccl:
      break;
  }
  on_all_then_agree(control, [&] {
    if (!obstacle.empty()) throw UsageError("--backend nccl: " + obstacle + "; use --backend mpi or auto");
    if (!everyone_can) throw UsageError("--backend nccl: another rank cannot use NCCL; use --backend mpi or auto");
  });
  return Backend::Nccl;
}

std::shared_ptr<Communicator> make_gradient_comm(Backend chosen, Communicator& control, int cuda_device,
                                                 double timeout_s) {
  if (chosen != Backend::Nccl) return std::shared_ptr<Communicator>(&control, [](Communicator*) {});
#if MNDDP_HAVE_NCCL
  auto* nccl = new NcclComm(control, cuda_device, timeout_s);
  // NCCL's asynchronous errors, polled by the watchdog so that one striking while the host waits
  // elsewhere still ends the job with NCCL's words. Removed before the communicator is freed
  // (removal waits for a check in progress).
  const int check = add_health_check([nccl] { return nccl->async_error(); });
  std::shared_ptr<NcclComm> owned(nccl, [check](NcclComm* comm) {
    remove_health_check(check);
    delete comm;
  });
  std::weak_ptr<NcclComm> weak = owned;
  Runtime::add_abort_hook([weak] {
    if (auto alive = weak.lock()) alive->abort();
  });
  return owned;
#else
  (void)cuda_device;
  (void)timeout_s;
  throw UsageError("--backend nccl: this mnddp was built without NCCL");
#endif
}

}  // namespace mnddp
