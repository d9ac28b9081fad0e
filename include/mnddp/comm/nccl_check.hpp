// The check for NCCL return codes, like check.hpp's for MPI and HDF5: a failure throws LibraryError
// naming the call, NCCL's error text (and the communicator's last error) and the source location.
// Only for code built with NCCL (MNDDP_HAVE_NCCL).
#pragma once

#include <nccl.h>

#include <source_location>

#include "mnddp/error.hpp"

namespace mnddp {

// `last_error`: ncclGetLastError of the communicator, when there is one (more specific than the code).
void check_nccl(ncclResult_t rc, const char* call, const char* last_error = nullptr,
                std::source_location where = std::source_location::current());

}  // namespace mnddp
