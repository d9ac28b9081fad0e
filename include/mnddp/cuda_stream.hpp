// CUDA streams and host fences without the CUDA headers, for code that must compile everywhere
// (the communicators, the MPI channel). The fence's implementation needs the CUDA runtime and exists
// in builds with CUDA (MNDDP_HAVE_CUDA); elsewhere making one is a logic error.
#pragma once

#include <memory>

namespace mnddp {

// A CUDA stream: `handle` is a cudaStream_t. A null handle is CUDA's legacy default stream, torch's
// default stream; "no stream at all" (host memory, nothing to order against) is an empty
// std::optional<CudaStream>, never a null handle.
struct CudaStream {
  void* handle = nullptr;
};

// The work queued on a stream so far, as a point another host thread can wait for: recorded where the
// work was queued (on the rank's device), waited for on, say, the MPI channel's thread before it hands
// a buffer filled by asynchronous device-to-host copies to MPI.
class HostFence {
 public:
  explicit HostFence(CudaStream stream);
  ~HostFence();
  HostFence(const HostFence&) = delete;
  HostFence& operator=(const HostFence&) = delete;
  // Blocks until the stream has done the work queued before the fence (a host wait on the GPU).
  void wait();

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

}  // namespace mnddp
