// Verifying a checkpoint with every rank at once: each rank reads and hashes 1/N of every array's
// checksum blocks, one all-gather gives every rank every block hash, and each compares every
// array's checksum. So resuming reads each byte once across the job, not the whole file on rank 0.
#pragma once

#include <cstdint>
#include <string>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

// The verdict on one checkpoint, the same on every rank.
struct CheckpointVerdict {
  enum class Kind { Good, Corrupt, Unreadable };
  Kind kind = Kind::Good;
  std::string message;    // why it is not good (the lowest failing rank's reason)
  std::int64_t step = 0;  // when good
};

// Collective. Corrupt: a checksum mismatch or a broken structure (CorruptCheckpoint); Unreadable:
// the file could not be read (EIO, EACCES: the storage, not the checkpoint). Format 1 files (CRC-32,
// which cannot be split) are verified whole by rank 0.
CheckpointVerdict verify_checkpoint_in_parallel(Communicator& comm, const std::string& path);

}  // namespace mnddp
