// Whole files from one rank to another over MPI: the node-local level's partner copies and the
// pieces a restarted run fetches from the nodes that hold them. Each transfer is a record on the
// communicator's channel (the watchdog sees a rank stuck in one). The receiver writes a path its
// caller chose (a unique temporary, created exclusively here) and renames it when the copy counts.
#pragma once

#include <cstdint>
#include <string>

#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

// Sends the file at `path` to rank `to` of `comm` (which calls receive_file). Returns its size.
// Throws Error naming the file when it cannot be read; the receiver then gets an empty transfer
// marked failed and throws too, so neither waits for the other.
std::uint64_t send_file(MpiComm& comm, const std::string& path, int to);

// Receives a file from rank `from` into `path`, which must not exist (O_EXCL, no symlink followed).
// Returns its size. On failure nothing is left at `path` and Error says why (the sender's reason
// when it could not read).
std::uint64_t receive_file(MpiComm& comm, int from, const std::string& path);

}  // namespace mnddp
