// The checkpoint schedule's decisions.
#include "mnddp/ckpt/checkpoint_schedule.hpp"

namespace mnddp {

CheckpointSchedule::CheckpointSchedule(CheckpointScheduleOptions options, std::int64_t start_step,
                                       Clock::time_point now)
    : options_(options),
      start_step_(start_step),
      last_saved_step_(start_step),
      last_local_step_(start_step),
      last_save_time_(now) {}

bool CheckpointSchedule::time_due(Clock::time_point now) const {
  return options_.enabled && options_.minutes > 0 &&
         std::chrono::duration<double>(now - last_save_time_).count() >= options_.minutes * 60.0;
}

CheckpointDecision CheckpointSchedule::decide(std::int64_t step, const AgreedFlags& flags, bool last) const {
  CheckpointDecision decision;
  if (!options_.enabled) return decision;
  const bool interval = options_.interval > 0 && step % options_.interval == 0;
  const bool budget_spent = options_.steps_per_run > 0 && step - start_step_ >= options_.steps_per_run;
  decision.deadline = !last && flags.deadline && !flags.preempted;
  decision.preempted = flags.preempted || decision.deadline;
  // The end of training stops anyway; only an early end is a stop.
  decision.stop = !last && (decision.preempted || budget_spent);
  // The final state is always kept; a step already saved is not written twice.
  const bool final_state = last && step != last_saved_step_;
  decision.save =
      (interval || flags.time_due || decision.preempted || budget_spent || final_state) && step != last_saved_step_;
  // Counted from the last local checkpoint, not by step % interval: one that waited for a busy
  // writer is taken at the first step after, and the next one counts from there.
  const bool local_due = options_.local_interval > 0 && step - last_local_step_ >= options_.local_interval &&
                         !flags.writer_busy && step != last_local_step_;
  decision.save_local = options_.local_interval > 0 && (decision.save || local_due);
  return decision;
}

void CheckpointSchedule::saved(std::int64_t step, Clock::time_point now, bool local) {
  last_local_step_ = step;
  if (local) return;
  last_saved_step_ = step;
  last_save_time_ = now;
}

}  // namespace mnddp
