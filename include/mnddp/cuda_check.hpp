// Checks for CUDA runtime return codes, like check.hpp's for MPI and HDF5: a failure throws
// LibraryError naming the call, CUDA's own error text and the source location. Only for code built
// with CUDA (MNDDP_HAVE_CUDA); NCCL's counterpart is comm/nccl_check.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>

#include "mnddp/error.hpp"

namespace mnddp {

void check_cuda(cudaError_t rc, const char* call, std::source_location where = std::source_location::current());

}  // namespace mnddp

#define MNDDP_CUDA_CHECK(call) ::mnddp::check_cuda((call), #call)
