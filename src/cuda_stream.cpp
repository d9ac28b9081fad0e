// HostFence: a CUDA event recorded on one thread and waited for on another.
#include "mnddp/cuda_stream.hpp"

#include <stdexcept>

#include "mnddp/build_config.hpp"
#include "mnddp/device_binding.hpp"

#if MNDDP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "mnddp/cuda_check.hpp"
#endif

namespace mnddp {

#if MNDDP_HAVE_CUDA

HostFence::HostFence(CudaStream stream) {
  bind_rank_device();  // a null handle is the current device's legacy default stream
  cudaEvent_t event = nullptr;
  MNDDP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  event_ = event;
  MNDDP_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream.handle)));
}

HostFence::~HostFence() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void HostFence::wait() {
  bind_rank_device();  // the waiting thread (the MPI channel's) may never have touched CUDA
  MNDDP_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

#else

HostFence::HostFence(CudaStream) { throw std::logic_error("HostFence: this mnddp was built without CUDA"); }
HostFence::~HostFence() = default;
void HostFence::wait() {}

#endif

}  // namespace mnddp
