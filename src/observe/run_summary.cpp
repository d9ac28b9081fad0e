// The end-of-run table: this rank's timings gathered to rank 0 in one all-gather, then printed.
#include "mnddp/observe/run_summary.hpp"

#include "mnddp/observe/resources.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/straggler_watch.hpp"
#include "mnddp/observe/startup_breakdown.hpp"

namespace mnddp {
namespace {

using Clock = RunObserver::Clock;

// "850 ms", "12.3 s", "4m 05s", "2h 03m 10s"
std::string duration(double s) {
  if (s < 1.0) return fmt::format("{:.0f} ms", s * 1e3);
  if (s < 120.0) return fmt::format("{:.{}f} s", s, s < 10.0 ? 2 : 1);
  const auto whole = static_cast<long long>(std::llround(s));
  if (whole < 3600) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02}m {:02}s", whole / 3600, whole % 3600 / 60, whole % 60);
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

RunSummary::RunSummary(Communicator& control, SummaryOutputs outputs, std::string host)
    : control_(control),
      outputs_(std::move(outputs)),
      host_(std::move(host)),
      metrics_(control.is_root() ? outputs_.metrics_file : std::string()),
      started_(Clock::now()) {}

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
  // --plan's comparison: the steps after mnddp plan's warm-up, as the plan measured them.
  if (steps_timed_ > kPlanWarmupSteps) {
    steady_seconds_ += seconds(begin, end);
    ++steady_steps_;
  }
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
  // --plan's memory comparison: the GPU allocator's peak on a GPU, the resident set's on a CPU.
  peak_memory_ = outcome.peak_device_bytes > 0 ? outcome.peak_device_bytes : peak_resident_bytes();
  peak_memory_name_ = outcome.peak_device_bytes > 0 ? "GPU peak" : "peak resident set";
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
    hosts = allgather_strings(control_, host_);
  }
  if (!control_.is_root()) return;
  auto at = [&](std::size_t rank, std::size_t slot) { return all[rank * Slot::Count + slot]; };
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

  Figures f;
  f.ranks = ranks;
  f.wall = seconds(process_start_time(), Clock::now());
  f.training = training;
  f.done = last_step_ - plan_.first_step;
  f.samples_per_second = training > 0 ? static_cast<double>(f.done * plan_.samples_per_step) / training : 0.0;
  f.step = steps_timed_ > 0 ? mean_over_ranks(Slot::StepSeconds) : 0.0;
  for (std::size_t p = 0; p < kStepPhaseCount; ++p) {
    f.phases[p].mean = mean_over_ranks(Slot::Phases + p);
    for (std::size_t r = 1; r < ranks; ++r)
      if (per_step(r, Slot::Phases + p) > per_step(f.phases[p].most, Slot::Phases + p)) f.phases[p].most = r;
    f.phases[p].most_seconds = per_step(f.phases[p].most, Slot::Phases + p);
  }
  f.outside = std::max(0.0, training - step_seconds_ - validation_seconds_ - checkpoint_seconds_);
  for (std::size_t r = 1; r < ranks; ++r)
    if (at(r, Slot::StartupTotal) > at(f.slowest_startup, Slot::StartupTotal)) f.slowest_startup = r;
  f.startup = at(f.slowest_startup, Slot::StartupTotal);
  for (std::size_t i = 0; i < std::min(kStartupSlots, startup_phases.size()); ++i)
    f.startup_phases.push_back({startup_phases[i].name, at(f.slowest_startup, Slot::StartupPhases + i)});
  f.hosts = std::move(hosts);

  text_ = table(f, outcome);
  // --log-level warn or error: warnings and errors only, so no table (the metrics file keeps it).
  if (spdlog::should_log(spdlog::level::info)) std::fputs(text_.c_str(), stdout);
  std::fflush(stdout);
  metrics_.write_line(record(f, outcome));
}

std::string RunSummary::table(const Figures& f, const RunOutcome& outcome) const {
  std::string t = "run summary\n";
  t += fmt::format("  wall time      {} (start-up {}, training {})\n", duration(f.wall),
                   duration(process_startup().total_seconds()), duration(f.training));
  const std::string ending = outcome.preempted       ? "; stopped by a preemption signal"
                             : outcome.stopped_early ? "; stopped by --steps-per-run"
                                                     : "";
  t += fmt::format("  steps          {} of {} ({} this run, epoch {}{}), {} samples, {:.0f} samples/s\n", outcome.steps,
                   plan_.total_steps, f.done, last_epoch_, ending, f.done * plan_.samples_per_step,
                   f.samples_per_second);
  if (f.step > 0) {
    t += fmt::format("  step time      {:.2f} ms per step, mean over {} rank{}; the rank that spent the most:\n",
                     f.step * 1e3, f.ranks, f.ranks == 1 ? "" : "s");
    double accounted = 0;
    for (std::size_t p = 0; p < kStepPhaseCount; ++p) {
      const PhaseFigures& phase = f.phases[p];
      accounted += phase.mean;
      t += fmt::format("    {:<13}{:>9.2f} ms {:>6.1f}%   rank {} ({}): {:.2f} ms\n",
                       phase_name(static_cast<StepPhase>(p)), phase.mean * 1e3, 100.0 * phase.mean / f.step, phase.most,
                       f.hosts[phase.most], phase.most_seconds * 1e3);
    }
    const double other = std::max(0.0, f.step - accounted);
    t += fmt::format("    {:<13}{:>9.2f} ms {:>6.1f}%   (the loop itself: learning rate, zeroing the gradients)\n",
                     "other", other * 1e3, 100.0 * other / f.step);
  }
  t += fmt::format("  outside steps  validation {} ({} pass{}), checkpoints {} (training blocked), logging {}\n",
                   duration(validation_seconds_), validations_, validations_ == 1 ? "" : "es",
                   duration(checkpoint_seconds_), duration(f.outside));
  if (final_)
    t += fmt::format("  validation     final {} {:.4f} at step {}; best {:.4f} at step {}\n", final_->name,
                     final_->value, final_->step, best_->value, best_->step);
  if (!outcome.last_checkpoint.empty())
    t += fmt::format("  checkpoints    {} (the last){}\n", outcome.last_checkpoint,
                     outcome.best_checkpoint.empty() ? "" : fmt::format("; best: {}", outcome.best_checkpoint));
  else if (!outputs_.checkpoint_dir.empty())
    t += fmt::format("  checkpoints    none written by this run (in {})\n", outputs_.checkpoint_dir);
  const std::string advice = checkpoint_advice_text(outcome.checkpoint_costs, outputs_.mtbf_hours, f.step,
                                                    outputs_.local_checkpoint_interval, outputs_.checkpoint_interval);
  if (!advice.empty()) t += fmt::format("  interval       {}\n", advice);
  const double steady = steady_step_s();
  if (outputs_.predicted_step_s > 0 && steady > 0)
    t += fmt::format(
        "  plan           predicted {:.2f} ms a step on {} ({}), measured {:.2f} ms after {} steps: {:+.1f}%{}\n",
        outputs_.predicted_step_s * 1e3, outputs_.rank_layout, outputs_.plan_network, steady * 1e3, kPlanWarmupSteps,
        100.0 * (outputs_.predicted_step_s / steady - 1.0),
        outputs_.predicted_memory_bytes > 0 && peak_memory_ > 0
            ? fmt::format("; memory a rank predicted {:.0f} MiB, rank 0's {} {:.0f} MiB: {:+.1f}%",
                          outputs_.predicted_memory_bytes / (1 << 20), peak_memory_name_, peak_memory_ / (1 << 20),
                          100.0 * (outputs_.predicted_memory_bytes / peak_memory_ - 1.0))
            : "");
  if (!outputs_.metrics_file.empty())
    t += fmt::format("  metrics        {} (this table too: kind \"summary\")\n", outputs_.metrics_file);
  if (!outputs_.tensorboard_dir.empty())
    t += fmt::format("  tensorboard    {} (tensorboard --logdir {})\n", outputs_.tensorboard_dir,
                     outputs_.tensorboard_dir);
  if (!outputs_.trace_dir.empty())
    t += fmt::format("  trace          {} (one file per rank; one file with a track per rank: mnddp trace merge {})\n",
                     outputs_.trace_dir, outputs_.trace_dir);
  if (stragglers_ != nullptr) {
    const StragglerVerdict v = stragglers_->verdict();
    if (v.rank < 0)
      t += fmt::format(
          "  straggler      none: no rank was the last to its first collective, by more than "
          "max(2 ms, 20% of a step), in half of the {} intervals\n",
          v.intervals);
    else
      t += fmt::format(
          "  straggler      rank {} ({}): the last to its first collective in {} of {} intervals, "
          "{:.2f} ms a step after the earliest rank{}\n",
          v.rank, v.host, v.late_intervals, v.intervals, v.late_s * 1e3,
          v.split_known ? fmt::format(" (against the others' mean: before its batch was ready {:+.2f} ms, "
                                      "forward {:+.2f} ms, backward {:+.2f} ms)",
                                      v.before_batch_s * 1e3, v.forward_s * 1e3, v.backward_s * 1e3)
                        : "");
  }
  std::string breakdown;
  for (const auto& [name, secs] : f.startup_phases)
    breakdown += fmt::format("{}{} {}", breakdown.empty() ? "" : ", ", name, duration(secs));
  t += fmt::format("  start-up       slowest rank {} ({}): {}{}{}\n", f.slowest_startup, f.hosts[f.slowest_startup],
                   duration(f.startup), breakdown.empty() ? "" : ": ", breakdown);
  return t;
}

std::string RunSummary::record(const Figures& f, const RunOutcome& outcome) const {
  nlohmann::json j = {{"kind", "summary"},
                      {"step", outcome.steps},
                      {"total_steps", plan_.total_steps},
                      {"steps_this_run", f.done},
                      {"ranks", f.ranks},
                      {"preempted", outcome.preempted},
                      {"stopped_early", outcome.stopped_early},
                      {"wall_s", f.wall},
                      {"training_s", f.training},
                      {"samples_per_s", f.samples_per_second},
                      {"step_time_s", f.step},
                      {"validation_s", validation_seconds_},
                      {"checkpoint_blocked_s", checkpoint_seconds_},
                      {"startup_s", f.startup},
                      {"startup_slowest_rank", f.slowest_startup},
                      {"last_checkpoint", outcome.last_checkpoint}};
  const auto level_record = [&](const CheckpointCosts::Level& level) {
    const IntervalAdvice advice = advise_interval(level, outputs_.mtbf_hours, f.step);
    return nlohmann::json{{"count", level.count},
                          {"blocked_s", level.blocked_s},
                          {"commit_s", level.commit_s},
                          {"advised_interval_s", advice.seconds},
                          {"advised_interval_steps", advice.steps}};
  };
  if (outputs_.predicted_step_s > 0)
    j["plan"] = {{"predicted_step_s", outputs_.predicted_step_s},
                 {"measured_step_s", steady_step_s()},
                 {"predicted_memory_bytes", outputs_.predicted_memory_bytes},
                 {"peak_bytes", peak_memory_},
                 {"network", outputs_.plan_network}};
  j["checkpoints"] = {{"mtbf_h", outputs_.mtbf_hours},
                      {"local", level_record(outcome.checkpoint_costs.local)},
                      {"file_system", level_record(outcome.checkpoint_costs.file_system)}};
  for (std::size_t p = 0; p < kStepPhaseCount; ++p) {
    std::string key(phase_name(static_cast<StepPhase>(p)));
    std::replace(key.begin(), key.end(), ' ', '_');
    j["phases"][key] = {
        {"mean_s", f.phases[p].mean}, {"most_rank", f.phases[p].most}, {"most_s", f.phases[p].most_seconds}};
  }
  for (const auto& [name, secs] : f.startup_phases) j["startup_phases_s"][name] = secs;
  if (stragglers_ != nullptr) {
    const StragglerVerdict v = stragglers_->verdict();
    j["straggler"] = nullptr;
    if (v.rank >= 0) {
      j["straggler"] = {{"rank", v.rank},
                        {"host", v.host},
                        {"late_intervals", v.late_intervals},
                        {"intervals", v.intervals},
                        {"late_s", v.late_s}};
      if (v.split_known) {
        j["straggler"]["before_batch_s"] = v.before_batch_s;
        j["straggler"]["forward_s"] = v.forward_s;
        j["straggler"]["backward_s"] = v.backward_s;
      }
    }
  }
  if (final_) {
    j["final"] = {{"metric", final_->name}, {"value", final_->value}, {"step", final_->step}};
    j["best"] = {{"metric", best_->name}, {"value", best_->value}, {"step", best_->step}};
  }
  return j.dump();
}

}  // namespace mnddp
