// A whole checkpoint from the node-local level's --zero 1|2 pieces: the base file and every old
// rank's share file of one step, all in one directory, become one file in the format of
// --checkpoint-dir (each optimizer-state array whole again), which any resume path reads on any
// world size and --zero. Every array read is checked against its checksum first. Torch-free.
#pragma once

#include <cstdint>
#include <string>

#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

// Writes `out_path` (created exclusively) with `self`, a communicator of this rank alone. Throws
// CorruptCheckpoint when the pieces do not fit together (a share missing or overlapping another, a
// step or shape that differs), and Error when they cannot be read or written.
void assemble_local_checkpoint(const std::string& directory, std::int64_t step, int shares, MpiComm& self,
                               const std::string& out_path);

}  // namespace mnddp
