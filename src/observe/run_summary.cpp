// The end-of-run table: this rank's timings gathered to rank 0 in one all-gather, then printed.
#include "mnddp/observe/run_summary.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/observe/startup_breakdown.hpp"

namespace mnddp {
namespace {

using Clock = RunObserver::Clock;

double seconds(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double>(end - begin).count();
}

// "850 ms", "12.3 s", "4m 05s", "2h 03m 10s"
std::string duration(double s) {
  if (s < 1.0) return fmt::format("{:.0f} ms", s * 1e3);
  if (s < 120.0) return fmt::format("{:.{}f} s", s, s < 10.0 ? 2 : 1);
  const auto whole = static_cast<long long>(std::llround(s));
  if (whole < 3600) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02}m {:02}s", whole / 3600, whole % 3600 / 60, whole % 60);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

// One rank's numbers, as gathered: fixed slots so every rank sends the same count.
constexpr std::size_t kStartupSlots = 16;
struct Slot {
  enum : std::size_t {
    Phases = 0,
    StepSeconds = kStepPhaseCount,
    StepsTimed,
    Training,
    Validation,
    Checkpoints,
    StartupTotal,
    StartupPhases,
    Count = StartupPhases + kStartupSlots,
  };
};

}  // namespace

std::string_view phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::DataWait:
      return "data wait";
    case StepPhase::Forward:
      return "forward";
    case StepPhase::Backward:
      return "backward";
    case StepPhase::ExposedComm:
      return "exposed comm";
    case StepPhase::Optimizer:
      return "optimizer";
  }
  return "?";
}

RunSummary::RunSummary(Communicator& control, SummaryOutputs outputs)
    : control_(control), outputs_(std::move(outputs)), started_(Clock::now()) {}

void RunSummary::run_started(const RunPlan& plan) {
  plan_ = plan;
  last_step_ = plan.first_step;
  started_ = Clock::now();
}

void RunSummary::phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) {
  phases_[static_cast<std::size_t>(phase)] += seconds(begin, end);
}

void RunSummary::step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) {
  step_seconds_ += seconds(begin, end);
  ++steps_timed_;
  last_step_ = step;
  last_epoch_ = epoch;
}

void RunSummary::validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                           Clock::time_point end) {
  validation_seconds_ += seconds(begin, end);
  ++validations_;
  const std::string name = outputs_.best_metric.empty() ? std::string(headline) : outputs_.best_metric;
  const double value = metric_value(m.metrics, name);
  if (std::isnan(value)) return;
  final_ = Tracked{name, value, m.step};
  const bool better = !best_ || (higher_is_better(name) ? value > best_->value : value < best_->value);
  if (better) best_ = final_;
}

void RunSummary::checkpoint_blocked(std::int64_t, Clock::time_point begin, Clock::time_point end) {
  checkpoint_seconds_ += seconds(begin, end);
}

void RunSummary::run_finished(const RunOutcome& outcome) {
  const double training = seconds(started_, Clock::now());
  const StartupBreakdown& startup = process_startup();
  const auto startup_phases = startup.phases();

  std::vector<double> mine(Slot::Count, 0.0);
  std::copy(phases_.begin(), phases_.end(), mine.begin() + Slot::Phases);
  mine[Slot::StepSeconds] = step_seconds_;
  mine[Slot::StepsTimed] = static_cast<double>(steps_timed_);
  mine[Slot::Training] = training;
  mine[Slot::Validation] = validation_seconds_;
  mine[Slot::Checkpoints] = checkpoint_seconds_;
  mine[Slot::StartupTotal] = startup.total_seconds();
  for (std::size_t i = 0; i < std::min(kStartupSlots, startup_phases.size()); ++i)
    mine[Slot::StartupPhases + i] = startup_phases[i].seconds;

  const auto ranks = static_cast<std::size_t>(control_.size());
  std::vector<double> all(ranks * Slot::Count);
  std::vector<std::string> hosts;
  {
    const CollectiveLabel label("run summary");
    control_.allgather(mine.data(), all.data(), Slot::Count, DType::F64);
    hosts = allgather_strings(control_, host_name());
  }
  if (!control_.is_root()) return;
  auto at = [&](std::size_t rank, std::size_t slot) { return all[rank * Slot::Count + slot]; };

  std::string t = "run summary\n";
  const std::int64_t done = last_step_ - plan_.first_step;
  const double process = seconds(process_start_time(), Clock::now());
  t += fmt::format("  wall time      {} (start-up {}, training {})\n", duration(process),
                   duration(startup.total_seconds()), duration(training));
  const std::string ending = outcome.preempted       ? "; stopped by a preemption signal"
                             : outcome.stopped_early ? "; stopped by --steps-per-run"
                                                     : "";
  t += fmt::format("  steps          {} of {} ({} this run, epoch {}{}), {} samples, {:.0f} samples/s\n", outcome.steps,
                   plan_.total_steps, done, last_epoch_, ending, done * plan_.samples_per_step,
                   training > 0 ? static_cast<double>(done * plan_.samples_per_step) / training : 0.0);

  // Per-step means: each rank's total over its own timed steps, then the mean over ranks.
  auto per_step = [&](std::size_t rank, std::size_t slot) {
    const double steps = at(rank, Slot::StepsTimed);
    return steps > 0 ? at(rank, slot) / steps : 0.0;
  };
  auto mean_over_ranks = [&](std::size_t slot) {
    double sum = 0;
    for (std::size_t r = 0; r < ranks; ++r) sum += per_step(r, slot);
    return sum / static_cast<double>(ranks);
  };
  const double step = mean_over_ranks(Slot::StepSeconds);
  if (steps_timed_ > 0 && step > 0) {
    t += fmt::format("  step time      {:.2f} ms per step, mean over {} rank{}; the rank that spent the most:\n",
                     step * 1e3, ranks, ranks == 1 ? "" : "s");
    double accounted = 0;
    for (std::size_t p = 0; p < kStepPhaseCount; ++p) {
      const double mean = mean_over_ranks(Slot::Phases + p);
      accounted += mean;
      std::size_t most = 0;
      for (std::size_t r = 1; r < ranks; ++r)
        if (per_step(r, Slot::Phases + p) > per_step(most, Slot::Phases + p)) most = r;
      t += fmt::format("    {:<13}{:>9.2f} ms {:>6.1f}%   rank {} ({}): {:.2f} ms\n",
                       phase_name(static_cast<StepPhase>(p)), mean * 1e3, 100.0 * mean / step, most, hosts[most],
                       per_step(most, Slot::Phases + p) * 1e3);
    }
    const double other = std::max(0.0, step - accounted);
    t += fmt::format("    {:<13}{:>9.2f} ms {:>6.1f}%   (the loop itself: learning rate, zeroing, bookkeeping)\n",
                     "other", other * 1e3, 100.0 * other / step);
  }
  const double outside = std::max(0.0, training - step_seconds_ - validation_seconds_ - checkpoint_seconds_);
  t += fmt::format("  outside steps  validation {} ({} pass{}), checkpoints {} (training blocked), logging {}\n",
                   duration(validation_seconds_), validations_, validations_ == 1 ? "" : "es",
                   duration(checkpoint_seconds_), duration(outside));
  if (final_)
    t += fmt::format("  validation     final {} {:.4f} at step {}; best {:.4f} at step {}\n", final_->name,
                     final_->value, final_->step, best_->value, best_->step);
  if (!outcome.last_checkpoint.empty())
    t += fmt::format("  checkpoints    {} (the last){}\n", outcome.last_checkpoint,
                     outcome.best_checkpoint.empty() ? "" : fmt::format("; best: {}", outcome.best_checkpoint));
  else if (!outputs_.checkpoint_dir.empty())
    t += fmt::format("  checkpoints    none written by this run (in {})\n", outputs_.checkpoint_dir);
  if (!outputs_.metrics_file.empty()) t += fmt::format("  metrics        {}\n", outputs_.metrics_file);
  if (!outputs_.tensorboard_dir.empty())
    t += fmt::format("  tensorboard    {} (tensorboard --logdir {})\n", outputs_.tensorboard_dir,
                     outputs_.tensorboard_dir);
  if (!outputs_.trace_dir.empty())
    t += fmt::format("  trace          {} (one file per rank; one file with a track per rank: mnddp trace merge {})\n",
                     outputs_.trace_dir, outputs_.trace_dir);

  std::size_t slowest = 0;
  for (std::size_t r = 1; r < ranks; ++r)
    if (at(r, Slot::StartupTotal) > at(slowest, Slot::StartupTotal)) slowest = r;
  std::string breakdown;
  for (std::size_t i = 0; i < std::min(kStartupSlots, startup_phases.size()); ++i)
    breakdown += fmt::format("{}{} {}", breakdown.empty() ? "" : ", ", startup_phases[i].name,
                             duration(at(slowest, Slot::StartupPhases + i)));
  t += fmt::format("  start-up       slowest rank {} ({}): {}{}{}\n", slowest, hosts[slowest],
                   duration(at(slowest, Slot::StartupTotal)), breakdown.empty() ? "" : ": ", breakdown);
  text_ = t;
  std::fputs(text_.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace mnddp
