// What training reports: the interval metrics (loss, learning rate, samples/s, step time, data wait),
// averaged over ranks every --log-interval steps, and the validation results; both to the log and to
// rank 0's metrics file. The interval in progress is part of a checkpoint, so a resumed run logs the
// same losses as an uninterrupted one.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/fault/fault_hooks.hpp"
#include "mnddp/observe/metrics.hpp"
#include "mnddp/train/evaluator.hpp"

namespace mnddp {

class TrainingLog {
 public:
  // `metrics_file`: rank 0's JSON-lines file ("" for none, and on the other ranks).
  // `interval_loss`, `interval_steps`: the interval carried over from a checkpoint.
  TrainingLog(const std::string& metrics_file, double interval_loss, std::int64_t interval_steps);

  void add_data_wait(double seconds) { data_wait_ += seconds; }
  void add_step(double loss) {
    loss_ += loss;
    ++steps_;
  }
  double interval_loss() const { return loss_; }
  std::int64_t interval_steps() const { return steps_; }

  // Collective over `control` (one all-reduce): the interval's metrics, logged and written; the
  // interval starts again. `samples_per_step`: the global batch of one optimizer step.
  StepMetrics report(std::int64_t step, std::int64_t epoch, std::int64_t total_steps, double lr,
                     std::int64_t samples_per_step, Communicator& control, const FaultHooks& faults);
  void report(std::int64_t step, std::int64_t epoch, const EvalResult& result);

 private:
  using Clock = std::chrono::steady_clock;
  MetricsWriter writer_;
  double loss_ = 0.0;
  std::int64_t steps_ = 0;
  double data_wait_ = 0.0;
  Clock::time_point start_ = Clock::now();
};

}  // namespace mnddp
