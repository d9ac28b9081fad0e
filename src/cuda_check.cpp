// The CUDA check function.
#include "mnddp/cuda_check.hpp"

namespace mnddp {

void check_cuda(cudaError_t rc, const char* call, std::source_location where) {
  if (rc != cudaSuccess) throw LibraryError("CUDA", call, cudaGetErrorString(rc), where);
}

}  // namespace mnddp
