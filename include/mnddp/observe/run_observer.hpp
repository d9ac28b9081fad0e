// RunObserver: what the training loop tells whoever watches it (the end-of-run summary, the progress
// bar, the timeline trace, TensorBoard). The loop calls Observers at fixed points and knows none of
// them; an observer knows no torch and no model, only steps, phases, metrics and paths.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mnddp/diagnose/activity.hpp"
#include "mnddp/observe/checkpoint_advice.hpp"
#include "mnddp/observe/metrics.hpp"

namespace mnddp {

// Where a rank's step time goes, phase by phase, in the order a step runs them.
enum class StepPhase {
  DataWait,     // waiting for the loader's next batch, and its copy to the device
  Forward,      // DDP's buffer broadcast, the model and the loss
  Backward,     // autograd, with the gradient buckets' all-reduces issued as they fill
  ExposedComm,  // after backward: waiting for all-reduces still in flight (what overlap did not hide)
  Optimizer,    // gradient checks, unscaling, clipping and the optimizer's step
};
inline constexpr std::size_t kStepPhaseCount = 5;
using PhaseSeconds = std::array<double, kStepPhaseCount>;
std::string_view phase_name(StepPhase phase);  // "data wait", "forward", ...

// What the run is about to do (every rank, before its first step).
struct RunPlan {
  std::int64_t first_step = 0;   // steps already done (resumed)
  std::int64_t total_steps = 0;  // of the whole run
  std::int64_t steps_per_epoch = 0;
  std::int64_t samples_per_step = 0;  // the global batch of one optimizer step
  int world_size = 1;
};

// How the run ended, and where its outputs went.
struct RunOutcome {
  std::int64_t steps = 0;  // the last step done (resumed ones included)
  bool preempted = false;
  bool stopped_early = false;        // --steps-per-run
  std::string last_checkpoint;       // "" when none was written by this invocation
  std::string best_checkpoint;       // --keep-best's file (rank 0, which prints the summary), "" when none
  CheckpointCosts checkpoint_costs;  // for the interval advice
  double peak_device_bytes = 0.0;    // the GPU allocator's peak on this rank (0 on the CPU)
};

class RunObserver {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~RunObserver() = default;

  // end - begin in seconds, for observers that add up what they hear.
  static double seconds(Clock::time_point begin, Clock::time_point end) {
    return std::chrono::duration<double>(end - begin).count();
  }

  virtual void run_started(const RunPlan&) {}
  // One phase of the step in progress on this rank (several per step with gradient accumulation).
  virtual void phase(StepPhase, Clock::time_point /*begin*/, Clock::time_point /*end*/) {}
  // Optimizer step `step` (from 1) is done on this rank.
  virtual void step_finished(std::int64_t /*step*/, std::int64_t /*epoch*/, Clock::time_point /*begin*/,
                             Clock::time_point /*end*/) {}
  // Every --log-interval, on every rank, with the interval's metrics averaged over ranks.
  virtual void interval(const StepMetrics&) {}
  // A validation pass begins after step `step` (every rank).
  virtual void validation_started(std::int64_t /*step*/) {}
  // A validation pass (every rank; the metrics are exact over all ranks). `headline`: the task's
  // main metric (accuracy, r2, perplexity).
  virtual void validated(const EvalMetrics&, std::string_view /*headline*/, Clock::time_point /*begin*/,
                         Clock::time_point /*end*/) {}
  // The loop waited for a checkpoint's snapshot (or its whole commit, when synchronous).
  virtual void checkpoint_blocked(std::int64_t /*step*/, Clock::time_point /*begin*/, Clock::time_point /*end*/) {}
  // Every rank, at the same point, once: an observer may be collective here.
  virtual void run_finished(const RunOutcome&) {}
};

// The run's observers, called in the order they were added.
class Observers final : public RunObserver {
 public:
  void add(std::unique_ptr<RunObserver> observer) {
    all_.push_back(observer.get());
    owned_.push_back(std::move(observer));
  }
  void add(RunObserver& observer) { all_.push_back(&observer); }  // owned elsewhere, outlives this
  bool empty() const { return all_.empty(); }

  void run_started(const RunPlan& plan) override {
    for (auto& o : all_) o->run_started(plan);
  }
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override {
    for (auto& o : all_) o->phase(phase, begin, end);
  }
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override {
    for (auto& o : all_) o->step_finished(step, epoch, begin, end);
  }
  void interval(const StepMetrics& m) override {
    for (auto& o : all_) o->interval(m);
  }
  void validation_started(std::int64_t step) override {
    for (auto& o : all_) o->validation_started(step);
  }
  void validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                 Clock::time_point end) override {
    for (auto& o : all_) o->validated(m, headline, begin, end);
  }
  void checkpoint_blocked(std::int64_t step, Clock::time_point begin, Clock::time_point end) override {
    for (auto& o : all_) o->checkpoint_blocked(step, begin, end);
  }
  void run_finished(const RunOutcome& outcome) override {
    for (auto& o : all_) o->run_finished(outcome);
  }

 private:
  std::vector<RunObserver*> all_;
  std::vector<std::unique_ptr<RunObserver>> owned_;
};

// Times one phase: from construction to destruction, reported to `observer`.
class PhaseTimer {
 public:
  PhaseTimer(RunObserver& observer, StepPhase phase)
      : observer_(observer), phase_(phase), activity_(phase_name(phase)), begin_(RunObserver::Clock::now()) {}
  ~PhaseTimer() { observer_.phase(phase_, begin_, RunObserver::Clock::now()); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  RunObserver& observer_;
  StepPhase phase_;
  Activity activity_;  // what the incident file says this thread is doing
  RunObserver::Clock::time_point begin_;
};

}  // namespace mnddp
