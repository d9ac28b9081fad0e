// Does the node-local level fit? Two checkpoints a node (the last complete one and the one being
// written) must fit in --local-checkpoint-dir's file system, and when that file system is memory
// (/dev/shm, tmpfs) they must also fit in the node's available memory beside what training still
// needs (the writer's host snapshots, and optimizer state not yet allocated). A run that would not
// fit is refused at start-up, not at its first checkpoint or by the kernel's OOM killer. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mnddp {

struct LocalCapacity {
  std::uint64_t checkpoint_bytes = 0;  // one node's files of one step
  std::uint64_t beside_bytes = 0;      // memory training will still take on the node
  bool in_memory = false;              // the directory's file system is tmpfs or ramfs
  std::uint64_t free_bytes = 0;        // the file system's space available to us
  std::uint64_t available_bytes = 0;   // the node's MemAvailable
};

// What the directory's file system and the node offer (statvfs, statfs, /proc/meminfo).
LocalCapacity measure_local_capacity(const std::string& directory);

// The refusal (one line naming the option, the directory, the node and the figures), or nullopt.
std::optional<std::string> local_capacity_shortfall(const LocalCapacity& capacity, const std::string& directory,
                                                    const std::string& host);

}  // namespace mnddp
