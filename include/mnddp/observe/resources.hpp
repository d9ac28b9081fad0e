// What this process holds: open file descriptors, threads, our communicators (MPI and NCCL
// channels) and HDF5 objects. Logged at debug level after every evaluation, so a leak over a long run is visible
// (and tested: tests/e2e/resources.sh).
#pragma once

#include <string>

namespace mnddp {

struct ResourceCounts {
  int open_files = 0;     // entries of /proc/self/fd
  int threads = 0;        // entries of /proc/self/task
  int communicators = 0;  // live collective channels (each tracked by the watchdog)
  int hdf5_objects = 0;   // open HDF5 files, datasets, groups, types, attributes
};

ResourceCounts count_resources();
std::string to_string(const ResourceCounts& counts);

// The process's resident set from /proc/self/status, in bytes: now (VmRSS) and its peak (VmHWM);
// 0 where the kernel does not say.
double resident_bytes();
double peak_resident_bytes();  // "12 open files, 7 threads, 3 communicators, 6 HDF5 objects"

}  // namespace mnddp
