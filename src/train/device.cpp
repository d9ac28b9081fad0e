// Device, thread and backend selection for one rank.
#include "mnddp/train/device.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <thread>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/nccl_comm.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

DeviceChoice select_device(const std::string& requested, const RankInfo& rank) {
  const int visible = MNDDP_HAVE_CUDA && requested != "cpu" ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (requested == "cuda" && visible == 0)
    throw UsageError(fmt::format(
        "--device cuda: no CUDA device is visible on {} ({})", rank.where(),
        MNDDP_HAVE_CUDA ? "check CUDA_VISIBLE_DEVICES and the driver" : "this mnddp was built without CUDA"));
  if (visible == 0) return {c10::Device(c10::kCPU), "cpu"};
  const int index = rank.local_rank % visible;
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)),
          fmt::format("cuda:{} of {} visible (CUDA_VISIBLE_DEVICES={})", index, visible, cvd ? cvd : "unset")};
}

int resolve_threads(int requested, const RankInfo& rank, const Environment& env) {
  if (requested > 0) return requested;
  if (auto n = env_int(env, "SLURM_CPUS_PER_TASK"); n && *n > 0) return static_cast<int>(*n);
  if (auto n = env_int(env, "OMP_NUM_THREADS"); n && *n > 0) return static_cast<int>(*n);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, rank.local_size));
}

std::string select_backend(const std::string& requested, const DeviceChoice& device, const RankInfo& rank,
                           Communicator& world) {
  // Why this rank cannot use NCCL, if it cannot.
  std::string obstacle;
  if (!MNDDP_HAVE_NCCL) {
    obstacle = "this mnddp was built without NCCL";
  } else if (device.device.is_cpu()) {
    obstacle = fmt::format("{} has no GPU", rank.where());
  } else if (rank.local_size > static_cast<int>(torch::cuda::device_count())) {
    obstacle = fmt::format("{} runs {} ranks on {} GPU(s), and NCCL needs one GPU per rank", rank.where(),
                           rank.local_size, torch::cuda::device_count());
  }
  const bool everyone_can = allreduce_min(world, obstacle.empty() ? 1 : 0) == 1;
  if (requested == "mpi") return "mpi";
  if (requested == "auto") return everyone_can ? "nccl" : "mpi";
  on_all_then_agree(world, [&] {
    if (!obstacle.empty()) throw UsageError("--backend nccl: " + obstacle + "; use --backend mpi or auto");
    if (!everyone_can) throw UsageError("--backend nccl: another rank cannot use NCCL; use --backend mpi or auto");
  });
  return "nccl";
}

std::shared_ptr<Communicator> make_gradient_comm(const std::string& backend, Communicator& world,
                                                 const DeviceChoice& device, double timeout_s) {
  if (backend != "nccl") return nullptr;
#if MNDDP_HAVE_NCCL
  auto nccl = std::make_shared<NcclComm>(world, device.device.index(), timeout_s);
  std::weak_ptr<NcclComm> weak = nccl;
  Runtime::add_abort_hook([weak] {
    if (auto alive = weak.lock()) alive->abort();
  });
  return nccl;
#else
  (void)world;
  (void)device;
  (void)timeout_s;
  throw UsageError("--backend nccl: this mnddp was built without NCCL");
#endif
}

}  // namespace mnddp
