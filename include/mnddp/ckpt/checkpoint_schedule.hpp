// When to checkpoint and when to stop, decided from plain numbers so it can be tested without MPI:
// every --checkpoint-interval steps, every --checkpoint-minutes, when a preemption signal arrived on
// any rank or the job's end is near (--deadline; then stop), when this invocation's --steps-per-run are done (then
// stop), and at the end of training unless this step was just saved. With a node-local level
// (--local-checkpoint-dir), also every --local-checkpoint-interval steps there: every file-system
// checkpoint is a local one too (written from the same snapshot), and a local one that falls due
// while the writer is still busy waits for the first step after it, instead of stalling training.
// The Checkpointer (train/checkpointer.hpp) feeds it the rank-wide flags it agreed on and does the saving.
#pragma once

#include <chrono>
#include <cstdint>

namespace mnddp {

struct CheckpointScheduleOptions {
  bool enabled = false;             // --checkpoint-dir given
  std::int64_t interval = 0;        // --checkpoint-interval (steps); 0: off
  double minutes = 0.0;             // --checkpoint-minutes; 0: off
  std::int64_t steps_per_run = 0;   // --steps-per-run; 0: no limit
  std::int64_t local_interval = 0;  // --local-checkpoint-interval (steps); 0: no node-local level
};

// What the ranks agreed on before deciding (all-reduced MAX, so identical on every rank).
struct AgreedFlags {
  bool preempted = false;    // a preemption signal arrived on some rank
  bool time_due = false;     // some rank's clock says --checkpoint-minutes have passed
  bool deadline = false;     // some rank's clock says the job's end is near (--deadline)
  bool writer_busy = false;  // some rank's checkpoint writer is still busy with an earlier commit
};

struct CheckpointDecision {
  bool save = false;        // write a checkpoint of this step now (to --checkpoint-dir)
  bool save_local = false;  // write it to the node-local level (always with `save`, when there is one)
  bool stop = false;        // end this invocation after it (preemption or --steps-per-run)
  bool preempted = false;   // ... because of a preemption signal, or the job's end (exit code 3 either way)
  bool deadline = false;    // ... because the job's end is near, no signal having come
};

class CheckpointSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  // `start_step`: where this invocation began (resumed step or 0); `now`: the clock at start, from
  // which --checkpoint-minutes count until the first save.
  CheckpointSchedule(CheckpointScheduleOptions options, std::int64_t start_step, Clock::time_point now);

  bool enabled() const { return options_.enabled; }
  // This rank's own view of the clock, to be agreed across ranks.
  bool time_due(Clock::time_point now) const;
  // After step `step` (optimizer steps done). `last`: training is complete at this step.
  CheckpointDecision decide(std::int64_t step, const AgreedFlags& flags, bool last) const;
  // A checkpoint of `step` was taken at `now` (`local`: at the node-local level only).
  void saved(std::int64_t step, Clock::time_point now, bool local = false);
  std::int64_t last_saved_step() const { return last_saved_step_; }
  std::int64_t last_local_step() const { return last_local_step_; }

 private:
  CheckpointScheduleOptions options_;
  std::int64_t start_step_;
  std::int64_t last_saved_step_;
  std::int64_t last_local_step_;
  Clock::time_point last_save_time_;
};

}  // namespace mnddp
