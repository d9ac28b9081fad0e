// Device and thread selection for one rank.
#include "mnddp/train/device.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/device_binding.hpp"
#include "mnddp/error.hpp"
#include "mnddp/train/determinism.hpp"
#include "mnddp/train/torch_cuda.hpp"

namespace mnddp {
namespace {

int node_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
// The node's cores shared among its ranks, at least one.
int cores_per_rank(const RankInfo& rank) { return std::max(1, node_cores() / std::max(1, rank.local_size)); }
// The cores this rank may use: Slurm's --cpus-per-task where it is set (its cgroup limits the rank to
// them, while the node reports all its cores), else an even share of the node.
int rank_cores(const RankInfo& rank, const Environment& env) {
  if (auto n = env_int(env, "SLURM_CPUS_PER_TASK"); n && *n > 0) return static_cast<int>(*n);
  return cores_per_rank(rank);
}

}  // namespace

DeviceChoice select_device(DeviceRequest requested, const RankInfo& rank) {
  const TorchCuda cuda = load_torch_cuda(requested);  // before ATen is asked anything about CUDA
  spdlog::debug("LibTorch's CUDA half: {}", cuda.detail);
  if (cuda.driver_without_torch_cuda)
    spdlog::warn(
        "--device auto: this machine has a CUDA driver, but LibTorch's CUDA half did not load, so {} "
        "trains on the CPU: {}",
        rank.where(), cuda.detail);
  const int visible = cuda.loaded ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (requested == DeviceRequest::Cuda && visible == 0)
    throw UsageError(fmt::format(
        "--device cuda: no CUDA device is visible on {} ({})", rank.where(),
        MNDDP_HAVE_CUDA ? "check CUDA_VISIBLE_DEVICES and the driver" : "this mnddp was built without CUDA"));
  if (visible == 0) return {c10::Device(c10::kCPU), 0, "cpu"};
  const int index = rank.local_rank % visible;
  set_rank_device(index);
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)), visible,
          fmt::format("cuda:{} of {} visible (CUDA_VISIBLE_DEVICES={})", index, visible, cvd ? cvd : "unset")};
}

int resolve_loader_threads(int requested, int torch_threads, const RankInfo& rank, const Environment& env) {
  if (requested > 0) return requested;
  return std::max(1, rank_cores(rank, env) - torch_threads);
}

bool spare_core_per_rank(int torch_threads, const RankInfo& rank, const Environment& env) {
  return rank_cores(rank, env) >= torch_threads + 1;
}

int resolve_threads(int requested, const RankInfo& rank, const Environment& env) {
  if (requested > 0) return requested;
  if (auto n = env_int(env, "SLURM_CPUS_PER_TASK"); n && *n > 0) return static_cast<int>(*n);
  if (auto n = env_int(env, "OMP_NUM_THREADS"); n && *n > 0) return static_cast<int>(*n);
  return cores_per_rank(rank);
}

int configure_threads(int requested, bool deterministic, const RankInfo& rank) {
  const Environment env = environment_from_process();
  const int threads = resolve_threads(requested, rank, env);
  at::set_num_threads(threads);
  if (deterministic) keep_matrix_products_thread_invariant();
  at::set_num_interop_threads(1);
  set_channel_spin(spare_core_per_rank(threads, rank, env));
  return threads;
}

}  // namespace mnddp
