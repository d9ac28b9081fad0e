// --inject-fault: a testing aid that makes a run fail in a chosen way at a chosen step, so the tests
// can show that every failure ends the job quickly, explains itself and loses nothing.
// Format: KIND@STEP[:RANK] (RANK: the rank that fails; default every rank). STEP counts optimizer
// steps from 1. Kinds (docs/ERRORS.md, "Fault injection"):
//   crash               the rank kills itself (SIGKILL) at the start of step STEP
//   hang                the rank stops before step STEP's collectives and never continues
//   slow                the rank sleeps 0.5 s in every step from STEP on (slow is not hung)
//   loader-exception    the data loader's reading thread throws while preparing step STEP's batch
//   nan-loss            the rank's loss of step STEP becomes NaN
//   desync              the rank's metrics all-reduce at step STEP has 1 element where the others
//                       have 2 (a desynchronised program; use with --log-interval 1)
//   checkpoint-kill     SIGKILL midway through writing the checkpoint of step STEP
//   checkpoint-fail     an error midway through writing the checkpoint of step STEP
//   checkpoint-fill     the checkpoint file system filled (a file 'injected-fill' in the checkpoint
//                       directory) after the free-space check of step STEP: the write hits ENOSPC
//   checkpoint-corrupt  the checkpoint of step STEP is committed, then one byte of it is flipped
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

struct FaultPlan {
  std::string kind;  // empty: no fault
  std::int64_t step = -1;
  int rank = -1;  // -1: every rank
  bool active() const { return !kind.empty(); }
  bool hits(const std::string& what, std::int64_t at_step, int my_rank) const {
    return kind == what && step == at_step && (rank < 0 || rank == my_rank);
  }
  // From STEP on (for faults that persist, like slow).
  bool hits_from(const std::string& what, std::int64_t at_step, int my_rank) const {
    return kind == what && at_step >= step && (rank < 0 || rank == my_rank);
  }
  std::string spec() const;  // "hang@5:1"
};

const std::vector<std::string>& fault_kinds();

// Throws UsageError naming --inject-fault for an unknown kind or a malformed spec.
FaultPlan parse_fault_plan(const std::string& spec);

// Prints "[rank R@host] mnddp: injected fault SPEC: WHAT" to stderr at once (the tests look for it).
void announce_fault(const FaultPlan& plan, const std::string& where, const std::string& what);

// checkpoint-fill: allocates nearly all free space of `directory`'s file system to `directory`/injected-fill.
void fill_file_system(const std::string& directory);

// checkpoint-corrupt: flips one byte in the data of the largest array of the checkpoint at `path`.
void corrupt_checkpoint(const std::string& path);
}  // namespace mnddp
