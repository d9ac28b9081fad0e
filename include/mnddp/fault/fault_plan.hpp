// --inject-fault: a testing aid that makes a run fail in a chosen way at a chosen step, so the tests
// can show that every failure ends the job quickly, explains itself and loses nothing.
// Format: KIND@STEP[:RANK] (RANK: the rank that fails; default every rank). STEP counts optimizer
// steps from 1. Kinds (docs/FAULT_TOLERANCE.md):
//   crash               the rank kills itself (SIGKILL) at the start of step STEP
//   segfault            the rank writes through a null pointer at the start of step STEP (SIGSEGV)
//   stack-overflow      the rank recurses without end at the start of step STEP: SIGSEGV on a stack
//                       with no room left, which only an alternate signal stack can handle
//   hang                the rank stops before step STEP's collectives and never continues
//   stall               the rank enters a collective that never completes at the start of step STEP
//                       (on every rank: a network that stopped delivering)
//   slow                the rank sleeps 0.5 s in every step from STEP on (slow is not hung)
//   loader-exception    the data loader's reading thread throws while preparing step STEP's batch
//   nan-loss            the rank's loss of step STEP becomes NaN
//   desync              the rank issues the metrics all-reduce of the log interval holding STEP from
//                       another place in the program (same size, another label): out of step in a
//                       way MPI cannot see
//   replica-drift       after step STEP's update the rank flips a mantissa bit of one parameter:
//                       replicas that silently differ
//   checkpoint-stall    the rank stops inside the write of the checkpoint of step STEP (after the
//                       file is created, before its first array), for ever: a hung file system
//   checkpoint-kill     SIGKILL midway through writing the checkpoint of step STEP
//   checkpoint-fail     an error midway through writing the checkpoint of step STEP
//   checkpoint-fill     the checkpoint file system filled (a file 'injected-fill' in the checkpoint
//                       directory) after the free-space check of step STEP: the write hits ENOSPC
//   checkpoint-corrupt  the checkpoint of step STEP is committed, then one byte of it is flipped
// The plan is parsed once, with the config; where each kind strikes is train/fault_hooks.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "mnddp/choices.hpp"

namespace mnddp {

enum class FaultKind {
  None,
  Crash,
  Segfault,
  StackOverflow,
  Hang,
  Stall,
  Slow,
  LoaderException,
  NanLoss,
  Desync,
  ReplicaDrift,
  CheckpointStall,
  CheckpointKill,
  CheckpointFail,
  CheckpointFill,
  CheckpointCorrupt
};

// The kinds --inject-fault accepts (None has no name: it is the empty option).
template <>
struct ChoiceNames<FaultKind> {
  static constexpr std::array table{named(FaultKind::Crash, "crash"),
                                    named(FaultKind::Segfault, "segfault"),
                                    named(FaultKind::StackOverflow, "stack-overflow"),
                                    named(FaultKind::Hang, "hang"),
                                    named(FaultKind::Stall, "stall"),
                                    named(FaultKind::Slow, "slow"),
                                    named(FaultKind::LoaderException, "loader-exception"),
                                    named(FaultKind::NanLoss, "nan-loss"),
                                    named(FaultKind::Desync, "desync"),
                                    named(FaultKind::ReplicaDrift, "replica-drift"),
                                    named(FaultKind::CheckpointStall, "checkpoint-stall"),
                                    named(FaultKind::CheckpointKill, "checkpoint-kill"),
                                    named(FaultKind::CheckpointFail, "checkpoint-fail"),
                                    named(FaultKind::CheckpointFill, "checkpoint-fill"),
                                    named(FaultKind::CheckpointCorrupt, "checkpoint-corrupt")};
};

struct FaultPlan {
  FaultKind kind = FaultKind::None;
  std::int64_t step = -1;
  int rank = -1;  // -1: every rank
  bool active() const { return kind != FaultKind::None; }
  // This kind, at exactly this step, on this rank.
  bool hits(FaultKind what, std::int64_t at_step, int my_rank) const {
    return kind == what && step == at_step && (rank < 0 || rank == my_rank);
  }
  // From STEP on (for faults that persist, like slow).
  bool hits_from(FaultKind what, std::int64_t at_step, int my_rank) const {
    return kind == what && at_step >= step && (rank < 0 || rank == my_rank);
  }
  std::string spec() const;  // "hang@5:1"; "" when inactive
  bool operator==(const FaultPlan&) const = default;
};

// "" gives the inactive plan. Throws UsageError naming --inject-fault for an unknown kind or a
// malformed spec.
FaultPlan parse_fault_plan(const std::string& spec);

}  // namespace mnddp
