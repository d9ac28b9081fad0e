// ProgressBar (--progress bar, or auto on a terminal): rank 0's one line redrawn in place: step of
// total, epoch, a bar, samples/s, loss, the data-wait share and the ETA. Between intervals it moves
// with rank 0's own steps; loss, samples/s and data wait are the last interval's (averaged over
// ranks). Log lines (validation, checkpoints, warnings) scroll above it.
#pragma once

#include <optional>
#include <string>

#include "mnddp/observe/run_observer.hpp"

namespace mnddp {

// Whether --progress auto draws a bar: stdout is a terminal that can erase a line.
bool stdout_is_terminal();

class ProgressBar final : public RunObserver {
 public:
  // `width`: the line's width in columns; 0 asks the terminal (80 when it does not say).
  explicit ProgressBar(int width = 0);
  ~ProgressBar() override;  // a run that failed: its error goes below the bar's last state

  void run_started(const RunPlan& plan) override;
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override;
  void interval(const StepMetrics& m) override;
  void validation_started(std::int64_t step) override;  // "validating" until the next step
  void run_finished(const RunOutcome& outcome) override;

  // The line for `step` at time `now` (drawn at most 10 times a second, and at every interval).
  std::string render(Clock::time_point now) const;

 private:
  void draw(Clock::time_point now, bool force);

  int width_;
  RunPlan plan_;
  Clock::time_point started_;
  Clock::time_point drawn_{};
  std::int64_t step_ = 0;
  std::int64_t epoch_ = 0;
  std::optional<StepMetrics> last_;
  bool validating_ = false;
};

}  // namespace mnddp
