// The injected faults' actions: announcement, a full file system, a corrupt checkpoint.
#include "mnddp/fault/fault_actions.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

void announce_fault(const FaultPlan& plan, const std::string& where, const std::string& what) {
  std::fprintf(stderr, "[%s] mnddp: injected fault %s: %s\n", where.c_str(), plan.spec().c_str(), what.c_str());
  std::fflush(stderr);
}

void stall_in_a_collective() {
  static CollectiveTracker channel("injected-stall");  // lives until the process ends
  channel.begin("allreduce", sizeof(float), std::string("the injected stall"));
  const Activity stalled("the injected stall's collective");
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

void fill_file_system(const std::string& directory) {
  const std::string path = directory + "/injected-fill";
  std::error_code error;
  const auto space = std::filesystem::space(directory, error);
  if (error) return;
  // Leave a sliver, so the checkpoint's file creation and first metadata succeed and a data write fails.
  const std::uintmax_t keep = 64u << 10;
  if (space.available <= keep) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return;
  (void)::posix_fallocate(fd, 0, static_cast<off_t>(space.available - keep));  // a racing rank may get ENOSPC
  ::close(fd);
}

void corrupt_checkpoint(const std::string& path) {
  std::lock_guard lock(hdf5_mutex());
  H5Handle file = h5_open_read_only(path);
  // The largest array: its bytes are surely data, not metadata.
  struct Largest {
    std::string name;
    hsize_t size = 0;
  } largest;
  auto visit = [](hid_t root, const char* name, const H5O_info_t* info, void* out) -> herr_t {
    if (info->type != H5O_TYPE_DATASET) return 0;
    H5Handle dataset(H5Dopen2(root, name, H5P_DEFAULT));
    const hsize_t size = H5Dget_storage_size(dataset.get());
    auto* best = static_cast<Largest*>(out);
    if (size > best->size) *best = {name, size};
    return 0;
  };
  H5Ovisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, visit, &largest);
  if (largest.size == 0) return;
  H5Handle dataset(H5Dopen2(file.get(), largest.name.c_str(), H5P_DEFAULT));
  const haddr_t offset = H5Dget_offset(dataset.get());
  dataset.reset();
  file.reset();
  if (offset == HADDR_UNDEF) return;
  std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(offset + largest.size / 2);
  char byte = 0;
  out.seekg(at);
  out.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  out.seekp(at);
  out.write(&byte, 1);
}

}  // namespace mnddp
