// A restarted run's way back through the node-local level (--local-checkpoint-dir): every node lists
// what its directory holds, the ranks agree on the newest step that survives whole somewhere
// (ckpt/local_restore_plan.hpp), the nodes that hold its pieces send them to those that lack them,
// and at --zero 1|2 each node assembles the whole file from base and shares. Every node then has
// the same whole checkpoint at the same path, which the usual resume verifies and reads, on this
// world size or another.
#pragma once

#include <cstdint>
#include <string>

#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

struct LocalRestore {
  std::string path;  // on every node; "" when the local level has nothing to restore
  std::int64_t step = -1;
  std::string summary;  // for the log: which node restored from where, in how long; or why not
};

// Collective over `control`. `run`: the --checkpoint-dir the directory must belong to (a directory
// claimed by another run is a UsageError, as for the writer). A failure to move or assemble the
// pieces is not fatal: the result is empty, and `summary` says why (the run falls back to
// --checkpoint-dir).
LocalRestore restore_local_level(MpiComm& control, const std::string& directory, const std::string& run);

}  // namespace mnddp
