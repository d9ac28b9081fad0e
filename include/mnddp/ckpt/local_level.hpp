// The node-local checkpoint level (--local-checkpoint-dir): each node writes the run's state into
// its own directory (memory or a local disk), far faster than the parallel file system, so a run
// can checkpoint every few steps and a lost node costs seconds. At --zero 0 every node holds the
// whole state, so any surviving node can restore everyone; at --zero 1|2 each rank's shares of the
// optimizer state exist only on its node, so each rank also copies them to a partner on the next
// node (SCR's PARTNER scheme): any one node can be lost. A commit is atomic across the job (write
// temporaries, agree, rename, agree, then remove older steps), so at most two steps live on a node:
// the last complete one and the one being written. ckpt/local_restore.hpp reads it back.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

struct LocalLevelOptions {
  std::string directory;  // --local-checkpoint-dir: the same path on every node
  std::string run;        // what the directory belongs to (--checkpoint-dir, made absolute)
  bool sharded = false;   // --zero 1|2: a base file per node, share files per rank, partner copies
};

// Where each rank's node is and who holds its partner copy: ranks of node n copy to node n+1
// (wrapping), the one of the same local rank there (or local rank modulo that node's size).
struct NodeLayout {
  std::vector<int> node_of;  // per world rank: its node's index (nodes ordered by lowest rank)
  std::vector<int> partner;  // per world rank: the rank that keeps its partner copy; -1 on one node
  int nodes = 1;
};
NodeLayout node_layout(const std::vector<int>& node_of);  // pure
// Collective over `world` and `node` (its ranks on this node): every rank's node index.
std::vector<int> node_of_ranks(MpiComm& world, MpiComm& node);

class LocalLevel {
 public:
  // Collective over `parent` (duplicates it, and splits it by node). Each node's lowest rank makes
  // the directory, claims it for `options.run` (UsageError when another run's checkpoints are
  // there) and removes the temporaries a dead writer left in it.
  LocalLevel(LocalLevelOptions options, MPI_Comm parent);
  ~LocalLevel();
  LocalLevel(const LocalLevel&) = delete;
  LocalLevel& operator=(const LocalLevel&) = delete;

  struct Parts {
    std::function<void(ParallelCheckpointWriter&)> node_file;   // the whole state, or (sharded) the base
    std::function<void(ParallelCheckpointWriter&)> own_shares;  // sharded: this rank's shares
  };
  // Collective over this level's communicators, from one thread at a time (the checkpoint writer's,
  // or the training thread's without --checkpoint-async). Throws the same Error on every rank when
  // any rank failed; the last complete step is then untouched.
  void write(std::int64_t step, const Parts& parts);

  const std::string& directory() const { return options_.directory; }
  const NodeLayout& layout() const { return layout_; }
  // The bytes this node's files of the last complete step take (0 before the first).
  std::uint64_t node_bytes() const { return node_bytes_; }

 private:
  void prune(std::int64_t keep);

  LocalLevelOptions options_;
  MpiComm world_;
  MPI_Comm node_split_ = MPI_COMM_NULL;
  std::unique_ptr<MpiComm> node_;
  MpiComm self_;
  NodeLayout layout_;
  std::uint64_t node_bytes_ = 0;
};

// The directory's claim: UsageError naming the option when it belongs to another run. Creates the
// directory and the marker when there is none. Runs on one rank per node.
void claim_local_directory(const std::string& directory, const std::string& run);

}  // namespace mnddp
