// What training reports: the interval metrics (loss, learning rate, samples/s, step time, data wait,
// exposed communication), averaged over ranks every --log-interval steps, and the validation
// results; both to the log and to rank 0's metrics file. The interval in progress is part of a
// checkpoint, so a resumed run logs the same losses as an uninterrupted one. It hears the step's
// phases as an observer of the run. Its all-reduce carries its riders' fields too (the consistency
// check, the straggler figures: diagnose/interval_rider.hpp), so they cost no collective of their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/diagnose/interval_rider.hpp"
#include "mnddp/fault/fault_hooks.hpp"
#include "mnddp/observe/metrics.hpp"
#include "mnddp/observe/run_observer.hpp"
#include "mnddp/train/evaluator.hpp"

namespace mnddp {

struct TrainingLogOptions {
  std::string metrics_file;  // rank 0's JSON-lines file ("" for none, and on the other ranks)
  std::int64_t total_steps = 0;
  std::int64_t samples_per_step = 0;  // the global batch of one optimizer step
  bool console = true;                // false: interval lines at debug level (a progress bar shows them)
};

class TrainingLog final : public RunObserver {
 public:
  // `interval_loss`, `interval_steps`: the interval carried over from a checkpoint.
  TrainingLog(TrainingLogOptions options, double interval_loss, std::int64_t interval_steps);

  void run_started(const RunPlan& plan) override;
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override;
  void add_step(double loss) {
    loss_ += loss;
    count_step();
  }
  // A step whose loss comes later, with others' (add_loss): a GPU's, read at the log interval.
  void count_step() {
    ++steps_;
    ++timed_steps_;
  }
  void add_loss(double loss_sum) { loss_ += loss_sum; }
  // The host waits on the GPU inside a step (host_waits.hpp), reported per step.
  void add_host_waits(std::uint64_t waits) { host_waits_ += static_cast<double>(waits); }
  double interval_loss() const { return loss_; }
  std::int64_t interval_steps() const { return steps_; }

  void add_rider(std::unique_ptr<IntervalRider> rider) { riders_.push_back(std::move(rider)); }

  // Collective over `control` (one all-reduce): the interval's metrics, logged and written, and the
  // riders' checks; the interval starts again. `loss_scale`: fp16's dynamic loss scale, 0 without
  // one. `last`: the run's last interval.
  StepMetrics report(std::int64_t step, std::int64_t epoch, double lr, double loss_scale, bool last, MpiComm& control,
                     const FaultHooks& faults);
  void report(std::int64_t step, std::int64_t epoch, const EvalResult& result);

 private:
  TrainingLogOptions options_;
  MetricsWriter writer_;
  double loss_ = 0.0;
  std::int64_t steps_ = 0;        // in the interval, the ones carried over from a checkpoint included
  std::int64_t timed_steps_ = 0;  // in the interval, in this invocation: the time-based figures' divisor
  double data_wait_ = 0.0;
  double exposed_comm_ = 0.0;
  double host_waits_ = 0.0;
  Clock::time_point start_ = Clock::now();
  std::vector<std::unique_ptr<IntervalRider>> riders_;
};

}  // namespace mnddp
