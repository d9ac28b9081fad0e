// Checks for MPI and HDF5 return codes: each failure throws LibraryError naming the call,
// the library's own error text and the source location, so the message reads like a backtrace.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <source_location>

#include "mnddp/error.hpp"

namespace mnddp {

void check_mpi(int rc, const char* call, std::source_location where = std::source_location::current());
// HDF5 returns a negative value (herr_t or hid_t) on failure.
void check_h5(long long rc, const char* call, std::source_location where = std::source_location::current());

}  // namespace mnddp

#define MNDDP_MPI_CHECK(call) ::mnddp::check_mpi((call), #call)
#define MNDDP_H5_CHECK(call) ::mnddp::check_h5(static_cast<long long>(call), #call)
