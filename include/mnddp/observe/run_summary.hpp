// RunSummary: the table rank 0 prints at the end of every run (completed, preempted or stopped by
// --steps-per-run): wall time, steps and samples/s; where a step's time went (data wait, forward,
// backward, exposed communication, optimizer: the mean over ranks and the rank that spent the most
// on each); the time outside steps; the final and best validation metric; where the checkpoints,
// metrics and trace went; and the start-up breakdown of the slowest rank. The same figures go to
// the metrics file as one line of kind "summary", for scripts. Collective once, at the end (one
// all-gather of a few numbers per rank over the control communicator).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/observe/run_observer.hpp"

namespace mnddp {

class StragglerWatch;

// Where the run's outputs go (empty: not written).
struct SummaryOutputs {
  std::string metrics_file;
  std::string checkpoint_dir;
  std::string trace_dir;
  std::string tensorboard_dir;
  std::string best_metric;   // --keep-best's metric; "" for the task's headline
  double mtbf_hours = 24.0;  // --mtbf, for the checkpoint interval advice
  std::int64_t local_checkpoint_interval = 0;
  std::int64_t checkpoint_interval = 0;
  // --plan: what mnddp plan predicted for this run's ranks and nodes (0: no prediction).
  double predicted_step_s = 0.0;
  double predicted_memory_bytes = 0.0;  // per rank (a CPU run: compared with rank 0's peak resident set)
  std::string plan_network = {};        // the network profile the prediction used
  std::string rank_layout = {};         // "4 ranks on 1 node"
};

class RunSummary final : public RunObserver {
 public:
  // `host`: this rank's host name, for the table.
  RunSummary(Communicator& control, SummaryOutputs outputs, std::string host);

  void run_started(const RunPlan& plan) override;
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override;
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override;
  void validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                 Clock::time_point end) override;
  void checkpoint_blocked(std::int64_t step, Clock::time_point begin, Clock::time_point end) override;
  // Collective: gathers every rank's timings; rank 0 prints the table.
  void run_finished(const RunOutcome& outcome) override;

  // Adds the straggler verdict (diagnose/straggler_watch.hpp) to the table and the record.
  void set_straggler_watch(const StragglerWatch* watch) { stragglers_ = watch; }

  // The table as printed (rank 0, after run_finished; "" elsewhere).
  const std::string& text() const { return text_; }

 private:
  // What rank 0 worked out from every rank's timings.
  struct PhaseFigures {
    double mean = 0.0;          // seconds per step, the mean over ranks
    std::size_t most = 0;       // the rank that spent the most on it
    double most_seconds = 0.0;  // its seconds per step
  };
  struct Figures {
    std::size_t ranks = 1;
    double wall = 0.0;      // since the process started
    double training = 0.0;  // since run_started
    std::int64_t done = 0;  // steps this invocation
    double samples_per_second = 0.0;
    double step = 0.0;  // seconds per step, the mean over ranks
    std::array<PhaseFigures, kStepPhaseCount> phases{};
    double outside = 0.0;  // rank 0's training time outside steps, validation and checkpoints
    std::size_t slowest_startup = 0;
    double startup = 0.0;
    std::vector<std::pair<std::string, double>> startup_phases;  // the slowest rank's
    std::vector<std::string> hosts;
  };
  std::string table(const Figures& f, const RunOutcome& outcome) const;
  std::string record(const Figures& f, const RunOutcome& outcome) const;  // one JSON line

  struct Tracked {
    std::string name;
    double value = 0.0;
    std::int64_t step = 0;
  };

  Communicator& control_;
  SummaryOutputs outputs_;
  std::string host_;
  MetricsWriter metrics_;  // rank 0: the summary as a line of the metrics file
  RunPlan plan_;
  Clock::time_point started_;
  double peak_memory_ = 0.0;  // this rank's peak at the end: the GPU allocator's, or the resident set's
  std::string peak_memory_name_;
  PhaseSeconds phases_{};  // this rank's totals
  double step_seconds_ = 0.0;
  std::int64_t steps_timed_ = 0;
  // This rank's steps after the first kPlanWarmupSteps of the run (mnddp plan's default warm-up),
  // the step time --plan's prediction is compared with.
  static constexpr std::int64_t kPlanWarmupSteps = 3;
  double steady_seconds_ = 0.0;
  std::int64_t steady_steps_ = 0;
  double steady_step_s() const {
    return steady_steps_ > 0 ? steady_seconds_ / static_cast<double>(steady_steps_) : 0.0;
  }
  std::int64_t last_step_ = 0;
  std::int64_t last_epoch_ = 0;
  double validation_seconds_ = 0.0;
  int validations_ = 0;
  double checkpoint_seconds_ = 0.0;
  std::optional<Tracked> final_;
  std::optional<Tracked> best_;
  std::string text_;
  const StragglerWatch* stragglers_ = nullptr;
};

}  // namespace mnddp
