// Device, thread and backend selection for one rank.
#include "mnddp/train/device.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <thread>

#include "mnddp/build_config.hpp"
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

std::string select_backend(const std::string& requested, const DeviceChoice& device) {
  if (requested == "nccl") {
    throw UsageError(fmt::format(
        "--backend nccl: the NCCL gradient backend is not available in this version (device {}); use --backend mpi "
        "or auto",
        device.description));
  }
  return "mpi";
}

}  // namespace mnddp
