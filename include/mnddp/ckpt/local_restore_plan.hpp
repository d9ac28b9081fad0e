// Which node-local checkpoint a restarted run can restore, and which files must travel between
// nodes first: the newest step whose pieces all survive somewhere (a whole file on any node; or a
// base and every old rank's shares, each on its own node or its partner's), and for every node
// that lacks a piece, one node that sends it. Pure: every rank computes the same plan from the same
// listings, and the unit tests feed it made-up ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/ckpt/local_files.hpp"

namespace mnddp {

// One node of the new run: its host, its lowest rank (the one that reads, writes and sends its
// files) and what its local directory holds.
struct NodeLocalFiles {
  std::string host;
  int leader = 0;
  std::vector<LocalFile> files;
};

struct LocalTransfer {
  int from_node = 0;  // indices into the nodes given to the plan
  int to_node = 0;
  std::string name;
};

struct LocalRestorePlan {
  std::int64_t step = -1;                // -1: nothing restorable (see why_not)
  bool assemble = false;                 // --zero 1|2 pieces: each node builds the whole file from them
  int shares = 0;                        // assemble: the old run's world size (one share file per rank)
  std::vector<LocalTransfer> transfers;  // in this order, on every rank
  std::string why_not;                   // step == -1: what the newest candidate lacks ("" when none exists)
};

LocalRestorePlan plan_local_restore(const std::vector<NodeLocalFiles>& nodes);

}  // namespace mnddp
