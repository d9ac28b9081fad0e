// The node-local level's room: the file system's, and the node's memory when the two are one.
#include "mnddp/ckpt/local_capacity.hpp"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <fstream>
#include <sstream>

namespace mnddp {
namespace {

std::string gib(std::uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30)); }

}  // namespace

LocalCapacity measure_local_capacity(const std::string& directory) {
  LocalCapacity capacity;
  struct statvfs space {};
  if (::statvfs(directory.c_str(), &space) == 0)
    capacity.free_bytes = static_cast<std::uint64_t>(space.f_bavail) * space.f_frsize;
  struct statfs kind {};
  if (::statfs(directory.c_str(), &kind) == 0)
    capacity.in_memory = kind.f_type == TMPFS_MAGIC || kind.f_type == RAMFS_MAGIC;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t kib = 0;
    if (fields >> name >> kib && name == "MemAvailable:") capacity.available_bytes = kib * 1024;
  }
  return capacity;
}

std::optional<std::string> local_capacity_shortfall(const LocalCapacity& c, const std::string& directory,
                                                    const std::string& host) {
  const std::uint64_t two = 2 * c.checkpoint_bytes;
  if (two > c.free_bytes)
    return fmt::format(
        "--local-checkpoint-dir '{}': two node-local checkpoints need {} on {} ({} each: the last complete one and "
        "the one being written) and its file system has {} free; free space, or choose another directory",
        directory, gib(two), host, gib(c.checkpoint_bytes), gib(c.free_bytes));
  if (c.in_memory && two + c.beside_bytes > c.available_bytes)
    return fmt::format(
        "--local-checkpoint-dir '{}' is in memory: two node-local checkpoints ({}) and what training will still "
        "take on {} ({}: the writer's snapshots and the optimizer state to come) need {}, and the node has {} "
        "available; use a local disk, fewer ranks per node, or --zero to shrink each node's share",
        directory, gib(two), host, gib(c.beside_bytes), gib(two + c.beside_bytes), gib(c.available_bytes));
  return std::nullopt;
}

}  // namespace mnddp
