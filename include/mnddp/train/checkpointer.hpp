// The run's checkpointing: the one CheckpointManager of --checkpoint-dir, the asynchronous writer
// handed that manager (--checkpoint-async), resuming (--resume), and the schedule. The trainer calls
// after_step() at every point where a checkpoint may be taken; the checkpointer agrees with the
// other ranks on the clock, on preemption signals and on the job's end being near (--deadline: it
// times its commits and the steps, and stops when the next step and a checkpoint would no longer fit
// before the end with the margin), decides (ckpt/checkpoint_schedule.hpp), saves and says whether
// this invocation should stop. With --local-checkpoint-dir every checkpoint goes to the node-local
// level (ckpt/local_level.hpp) first and every file-system one is written from the same snapshot
// right after, on the same writer thread. Without --checkpoint-dir it never communicates.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "mnddp/ckpt/async_checkpointer.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/checkpoint_schedule.hpp"
#include "mnddp/ckpt/local_level.hpp"
#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/fault/fault_hooks.hpp"
#include "mnddp/job_deadline.hpp"
#include "mnddp/observe/checkpoint_advice.hpp"

namespace mnddp {

struct CheckpointerOptions {
  std::string directory;  // empty: no checkpoints
  int keep_last = 3;
  bool async = true;
  CheckpointScheduleOptions schedule;
  std::string config_ini;           // stored in every checkpoint
  std::string keep_best;            // a validation metric; empty: no best.h5
  DeadlineRequest deadline;         // --deadline: when the job will be ended
  double deadline_margin_s = 30.0;  // --deadline-margin: the last checkpoint ends at least this early
  LocalLevelOptions local;          // --local-checkpoint-dir; an empty directory: no node-local level
};

class Checkpointer {
 public:
  // Collective over `control`. `before_save` runs on every rank before a snapshot: it makes the
  // replicas' buffers agree (every rank writes a share of the same state) and completes the
  // position with what the loop keeps on a device (the interval's loss), which it may throw for.
  Checkpointer(CheckpointerOptions options, MpiComm& control, const FaultHooks& faults,
               std::function<void(TrainingPosition&)> before_save);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return schedule_.enabled(); }

  // Collective: reads the checkpoint at `path` (found and verified by find_resume_point, train/
  // resume_plan.hpp) into `state` and returns its position as written, with the path.
  struct Resumed {
    TrainingPosition position;
    std::string path;
  };
  Resumed resume(const TrainingStateRefs& state, const std::string& path);

  // Collective, after a step (`position.step` steps done). `last`: training is complete. Saves when
  // due and reports whether to stop; a stop, and the end of training, wait for the commit.
  CheckpointDecision after_step(const TrainingPosition& position, bool last, const TrainingStateRefs& state);

  // Every rank: waits for an asynchronous commit in flight (its failure is thrown here, on all).
  void wait();

  // --keep-best: validation at this step gave `value`. If it beats the best so far (every rank
  // decides alike: the metrics are all-reduced), the next after_step() saves this step, due or
  // not, and keeps it as best.h5. The best so far survives resume (best.json).
  void report_validation(std::int64_t step, double value);

  // After wait(): the newest checkpoint this invocation committed ("" when none), and on rank 0
  // (which keeps it) best.h5's path when this invocation kept one.
  std::string last_written() const;
  std::string best_written() const;
  CheckpointCosts costs() const;

 private:
  // `to_file_system`: to --checkpoint-dir (and the local level, when there is one); otherwise to the
  // local level only.
  void save(const TrainingPosition& position, const TrainingStateRefs& state, bool wait, bool to_file_system);
  // This rank's view: would a step and a checkpoint still end before the job's end, with the margin?
  bool deadline_near(std::chrono::steady_clock::time_point now);

  CheckpointerOptions options_;
  MpiComm& control_;
  const FaultHooks& faults_;
  std::function<void(TrainingPosition&)> before_save_;
  std::unique_ptr<CheckpointManager> manager_;       // when a directory is given
  std::unique_ptr<LocalLevel> local_;                // --local-checkpoint-dir
  std::unique_ptr<AsyncCheckpointer> async_;         // and --checkpoint-async
  std::unique_ptr<AsyncCheckpointer> local_writer_;  // --checkpoint-async with a node-local level
  CheckpointSchedule schedule_;
  std::optional<double> best_;        // the best value of options_.keep_best so far
  std::optional<double> new_best_;    // a better one, to save at the next after_step()
  mutable std::mutex written_mutex_;  // the commit's `done` may run on the writer thread
  std::string last_written_;
  std::string best_written_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;  // the job's end, on this rank's clock
  std::string deadline_source_;
  double longest_commit_s_ = 0.0;  // under written_mutex_: the longest save so far, its wait included
  CheckpointCosts costs_;          // under written_mutex_ (commit times come from the writer thread)
  double longest_step_s_ = 0.0;    // the longest time between two after_step() calls
  std::optional<std::chrono::steady_clock::time_point> previous_step_;
};

}  // namespace mnddp
