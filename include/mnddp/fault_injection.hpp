// --inject-fault: a testing aid that makes a run fail in a chosen way at a chosen step, so the tests
// can show that every failure ends the job cleanly and loses nothing. Format: KIND@STEP[:RANK]
// (RANK: the rank that fails; default every rank). Kinds:
//   checkpoint-kill   SIGKILL midway through writing the checkpoint of step STEP
//   checkpoint-fail   an error midway through writing the checkpoint of step STEP
//   checkpoint-fill   the checkpoint file system filled (a file 'injected-fill' in the checkpoint
//                     directory) after the free-space check of step STEP: the write itself hits ENOSPC
#pragma once

#include <cstdint>
#include <string>

namespace mnddp {

struct FaultPlan {
  std::string kind;  // empty: no fault
  std::int64_t step = -1;
  int rank = -1;  // -1: every rank
  bool active() const { return !kind.empty(); }
  bool hits(const std::string& what, std::int64_t at_step, int my_rank) const {
    return kind == what && step == at_step && (rank < 0 || rank == my_rank);
  }
};

// Throws UsageError naming --inject-fault for an unknown kind or a malformed spec.
FaultPlan parse_fault_plan(const std::string& spec);

// checkpoint-fill: allocates nearly all free space of `directory`'s file system to `directory`/injected-fill.
void fill_file_system(const std::string& directory);

}  // namespace mnddp
