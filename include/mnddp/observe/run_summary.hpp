// RunSummary: the table rank 0 prints at the end of every run (completed, preempted or stopped by
// --steps-per-run): wall time, steps and samples/s; where a step's time went (data wait, forward,
// backward, exposed communication, optimizer: the mean over ranks and the rank that spent the most
// on each); the time outside steps; the final and best validation metric; where the checkpoints,
// metrics and trace went; and the start-up breakdown of the slowest rank. Collective once, at the
// end (one all-gather of a few numbers per rank over the control communicator).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/observe/run_observer.hpp"

namespace mnddp {

// Where the run's outputs go (empty: not written).
struct SummaryOutputs {
  std::string metrics_file;
  std::string checkpoint_dir;
  std::string trace_dir;
  std::string tensorboard_dir;
  std::string best_metric;  // --keep-best's metric; "" for the task's headline
};

class RunSummary final : public RunObserver {
 public:
  RunSummary(Communicator& control, SummaryOutputs outputs);

  void run_started(const RunPlan& plan) override;
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override;
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override;
  void validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                 Clock::time_point end) override;
  void checkpoint_blocked(std::int64_t step, Clock::time_point begin, Clock::time_point end) override;
  // Collective: gathers every rank's timings; rank 0 prints the table.
  void run_finished(const RunOutcome& outcome) override;

  // The table as printed (rank 0, after run_finished; "" elsewhere).
  const std::string& text() const { return text_; }

 private:
  struct Tracked {
    std::string name;
    double value = 0.0;
    std::int64_t step = 0;
  };

  Communicator& control_;
  SummaryOutputs outputs_;
  RunPlan plan_;
  Clock::time_point started_;
  PhaseSeconds phases_{};  // this rank's totals
  double step_seconds_ = 0.0;
  std::int64_t steps_timed_ = 0;
  std::int64_t last_step_ = 0;
  std::int64_t last_epoch_ = 0;
  double validation_seconds_ = 0.0;
  int validations_ = 0;
  double checkpoint_seconds_ = 0.0;
  std::optional<Tracked> final_;
  std::optional<Tracked> best_;
  std::string text_;
};

}  // namespace mnddp
