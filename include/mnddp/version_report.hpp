// `mnddp version`: the versions this mnddp was built with, then each library the process loaded,
// with its run-time version and the file it came from. On a cluster a module's LD_LIBRARY_PATH, an
// LD_PRELOAD or a moved install can put another MPI, HDF5 or torch in front: this says which won.
#pragma once

#include <string>

namespace mnddp {

// `allocator`: the malloc in use (host_allocator_name()).
std::string version_report(const char* allocator);

}  // namespace mnddp
