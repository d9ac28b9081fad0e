// The rank's CUDA device, recorded once and bound on each thread that asks.
#include "mnddp/device_binding.hpp"

#include <atomic>

#include "mnddp/build_config.hpp"

#if MNDDP_HAVE_CUDA
#include "mnddp/cuda_check.hpp"
#endif

namespace mnddp {
namespace {

std::atomic<int> g_device{-1};

}  // namespace

void set_rank_device(int cuda_index) {
  g_device.store(cuda_index);
  bind_rank_device();
}

int rank_device() { return g_device.load(); }

void bind_rank_device() {
#if MNDDP_HAVE_CUDA
  const int device = g_device.load();
  if (device >= 0) MNDDP_CUDA_CHECK(cudaSetDevice(device));
#endif
}

}  // namespace mnddp
