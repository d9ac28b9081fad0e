// Resource counts from /proc and the collective trackers.
#include "mnddp/observe/resources.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {
namespace {

int entries(const char* directory) {
  std::error_code error;
  int n = 0;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) ++n;
  return n;
}

}  // namespace

ResourceCounts count_resources() {
  ResourceCounts counts;
  counts.open_files = entries("/proc/self/fd") - 1;  // the directory being listed holds one
  counts.threads = entries("/proc/self/task");
  counts.communicators = static_cast<int>(CollectiveTracker::snapshot_all().size());
  std::lock_guard lock(hdf5_mutex());
  counts.hdf5_objects = static_cast<int>(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
  return counts;
}

std::string to_string(const ResourceCounts& counts) {
  return fmt::format("{} open files, {} threads, {} communicators, {} HDF5 objects", counts.open_files, counts.threads,
                     counts.communicators, counts.hdf5_objects);
}

namespace {

double status_bytes(std::string_view key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(key)) return std::strtod(line.c_str() + key.size(), nullptr) * 1024.0;  // "kB"
  return 0.0;
}

}  // namespace

double resident_bytes() { return status_bytes("VmRSS:"); }
double peak_resident_bytes() { return status_bytes("VmHWM:"); }

}  // namespace mnddp
