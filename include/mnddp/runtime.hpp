// Runtime: owns MPI for the process. Initialises it with a checked thread level, learns rank,
// world, local rank (MPI_Comm_split_type SHARED) and node count, checks the launch environment,
// and is the one place a fatal error ends the job (abort_all).
#pragma once

#include <functional>
#include <string>

#include "mnddp/env_info.hpp"

namespace mnddp {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes of this node
  int local_size = 1;  // processes on this node
  int node_count = 1;
  int node_index = 0;  // this node's position among the nodes (by lowest world rank)
  std::string host;
  bool is_root() const { return rank == 0; }
  // "rank 3@nodeA" prefix for messages about this rank.
  std::string where() const;
};

class Runtime {
 public:
  // Calls MPI_Init_thread and requires MPI_THREAD_MULTIPLE (the reducer's communication thread
  // and the main thread both call MPI). Throws Error if MPI cannot give it.
  Runtime(int& argc, char**& argv);
  ~Runtime();  // MPI_Finalize, unless the job is being aborted
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RankInfo& info() const { return info_; }
  bool is_root() const { return info_.is_root(); }

  // Refuses a launch where the MPI world disagrees with the launcher (srun without working PMI
  // starts N singletons that each say "rank 0 of 1"). Throws UsageError.
  void check_launch_environment(const Environment& env) const;

  // Run before MPI_Abort by abort_all (e.g. ncclCommAbort), most recent first.
  static void add_abort_hook(std::function<void()> hook);

  // Logs `reason` with this rank's identity to stderr, runs the abort hooks and ends every rank
  // with MPI_Abort(exit_code). Safe to call from any thread; never returns. Once only: a second
  // caller waits for the first one's exit. Arms an exit deadline first (kAbortDeadlineSeconds), so a
  // hook that never returns (ncclCommAbort on a wedged device) cannot keep the rank alive.
  [[noreturn]] static void abort_all(const std::string& reason, int exit_code);
  static constexpr double kAbortDeadlineSeconds = 20.0;

  // A safety net for the way out: if the process has not ended `seconds` from now (a finalize or a
  // destructor waiting on a rank that is gone, an abort hook that hangs), it prints why and exits
  // with `exit_code`.
  static void arm_exit_deadline(double seconds, int exit_code);

 private:
  RankInfo info_;
};

}  // namespace mnddp
