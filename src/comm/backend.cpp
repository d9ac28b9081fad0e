// Gradient backend selection and construction.
#include "mnddp/comm/backend.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/health_checks.hpp"
#include "mnddp/error.hpp"

#if MNDDP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "mnddp/cuda_check.hpp"
#endif
#if MNDDP_HAVE_NCCL
#include "mnddp/comm/nccl_comm.hpp"
#include "mnddp/comm/nccl_library.hpp"
#endif

namespace mnddp {

DeviceIdentity device_identity(int cuda_device, const std::string& host_name, const Environment& env) {
  DeviceIdentity identity{env_value(env, "NCCL_HOSTID").value_or(host_name), ""};
  if (cuda_device < 0) return identity;
#if MNDDP_HAVE_CUDA
  char bus_id[32] = {};
  MNDDP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), cuda_device));
  identity.device = bus_id;
#else
  identity.device = fmt::format("device {}", cuda_device);
#endif
  return identity;
}

BackendChoice decide_gradient_backend(Backend requested, const std::vector<DeviceIdentity>& ranks, bool have_nccl) {
  // The first reason NCCL cannot carry the gradients, if there is one.
  std::string obstacle;
  if (!have_nccl) obstacle = "this mnddp was built without NCCL";
  std::map<std::pair<std::string, std::string>, std::size_t> first_user;
  for (std::size_t r = 0; r < ranks.size() && obstacle.empty(); ++r) {
    const DeviceIdentity& id = ranks[r];
    if (id.device.empty()) {
      obstacle = fmt::format("rank {} ({}) has no GPU", r, id.host);
      break;
    }
    const auto [where, fresh] = first_user.emplace(std::pair{id.host, id.device}, r);
    if (!fresh)
      obstacle = fmt::format("ranks {} and {} share GPU {} on {}, and NCCL needs one GPU per rank", where->second, r,
                             id.device, id.host);
  }
  std::set<std::string> hosts;
  for (const auto& id : ranks) hosts.insert(id.host);
  switch (requested) {
    case Backend::Mpi:
      return {Backend::Mpi, "--backend mpi"};
    case Backend::Auto:
      if (!obstacle.empty()) return {Backend::Mpi, "--backend auto: " + obstacle};
      return {Backend::Nccl, fmt::format("--backend auto: every rank has a GPU of its own ({} GPUs on {} host{})",
                                         ranks.size(), hosts.size(), hosts.size() == 1 ? "" : "s")};
    case Backend::Nccl:
      break;
  }
  if (!obstacle.empty()) throw UsageError("--backend nccl: " + obstacle + "; use --backend mpi or auto");
  return {Backend::Nccl, fmt::format("--backend nccl ({} GPUs on {} host{})", ranks.size(), hosts.size(),
                                     hosts.size() == 1 ? "" : "s")};
}

namespace {

// "host\ndevice", and back: how an identity travels in allgather_strings.
std::string encode(const DeviceIdentity& id) { return id.host + '\n' + id.device; }
DeviceIdentity decode(const std::string& text) {
  const auto cut = text.find('\n');
  return {text.substr(0, cut), cut == std::string::npos ? "" : text.substr(cut + 1)};
}

}  // namespace

Backend select_gradient_backend(Backend requested, int cuda_device, const RankInfo& rank, Communicator& control) {
  DeviceIdentity mine;
  on_all_then_agree(control, [&] { mine = device_identity(cuda_device, rank.host, environment_from_process()); });
  std::vector<DeviceIdentity> ranks;
  for (const auto& text : allgather_strings(control, encode(mine))) ranks.push_back(decode(text));
  BackendChoice choice;
  on_all_then_agree(control, [&] { choice = decide_gradient_backend(requested, ranks, MNDDP_HAVE_NCCL); });
#if MNDDP_HAVE_NCCL
  if (choice.backend == Backend::Nccl) {
    on_all_then_agree(control, [] {
      if (auto problem = nccl_library_problem()) throw UsageError(*problem);
    });
    const NcclLibrary library = loaded_nccl_library();
    choice.reason += fmt::format("; NCCL {} ({})", nccl_version_text(library.loaded_version), library.path);
  }
#endif
  if (control.is_root()) spdlog::info("gradients over {}: {}", choice_name(choice.backend), choice.reason);
  return choice.backend;
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
