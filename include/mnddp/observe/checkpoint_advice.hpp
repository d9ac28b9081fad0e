// How often to checkpoint, by Young's and Daly's rule: with a checkpoint costing C seconds of
// training and failures coming every M seconds on average, the interval that loses the least work is
// about sqrt(2 C M) (Young 1974; Daly 2006 refines it by terms that matter only when C nears M). Here
// C is what a checkpoint blocked training, measured in the run, and M is --mtbf. An interval shorter
// than the writer's own commit cannot be kept, so the advice is never below that. Pure.
#pragma once

#include <cstdint>
#include <string>

namespace mnddp {

// What checkpointing cost an invocation, per level (rank 0's view): how many, how long training was
// blocked for them (the snapshot, and waits for a busy writer), and how long the writer took.
struct CheckpointCosts {
  struct Level {
    int count = 0;  // checkpoints taken for this level (training blocked blocked_s for them)
    double blocked_s = 0.0;
    int commits = 0;  // writes to this level (commit_s long in all; beside training when async)
    double commit_s = 0.0;
  };
  Level local;        // count: node-local only; commits: every node-local write
  Level file_system;  // --checkpoint-dir
};

struct IntervalAdvice {
  double cost_s = 0.0;        // C: blocked seconds per checkpoint
  double seconds = 0.0;       // the advised interval
  std::int64_t steps = 0;     // in steps of the run's mean step time (at least 1)
  bool commit_bound = false;  // raised to the commit's length (sqrt(2 C M) was shorter)
};

// For one level; nullopt-like (steps 0) when it took no checkpoint.
IntervalAdvice advise_interval(const CheckpointCosts::Level& level, double mtbf_hours, double step_s);

// The summary's lines ("" when no checkpoint was taken): each level's cost, its advised interval and
// the one the run used (`local_interval`, `file_system_interval` in steps; 0: none set).
std::string checkpoint_advice_text(const CheckpointCosts& costs, double mtbf_hours, double step_s,
                                   std::int64_t local_interval, std::int64_t file_system_interval);

}  // namespace mnddp
