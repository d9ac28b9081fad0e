// Checkpointing for the trainer: resume, schedule agreement, snapshot and commit.
#include "mnddp/train/checkpointer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "mnddp/env_info.hpp"
#include "mnddp/error.hpp"
#include "mnddp/observe/startup_breakdown.hpp"

#include "mnddp/observe/timeline.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/safe_files.hpp"
#include "mnddp/task/metric.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

// Why this invocation stopped, for job scripts (slurm/train_requeue.sbatch requeues after
// "deadline"): one line in <checkpoint-dir>/stop-reason, replaced atomically. A script's guide, not
// the checkpoint's: failing to write it only warns.
void write_stop_reason(const std::string& directory, const std::string& reason) {
  try {
    replace_file(directory, "stop-reason", reason + '\n');
  } catch (const Error& e) {
    spdlog::warn("job scripts will not see why the run stopped ({}): {}", reason, e.what());
  }
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

Checkpointer::Checkpointer(CheckpointerOptions options, MpiComm& control, const FaultHooks& faults,
                           std::function<void(TrainingPosition&)> before_save)
    : options_(std::move(options)),
      control_(control),
      faults_(faults),
      before_save_(std::move(before_save)),
      schedule_(options_.schedule, 0, Clock::now()) {
  if (options_.directory.empty()) return;
  manager_ = std::make_unique<CheckpointManager>(options_.directory, options_.keep_last, control_);
  if (!options_.local.directory.empty()) local_ = std::make_unique<LocalLevel>(options_.local, control_.handle());
  if (options_.async) async_ = std::make_unique<AsyncCheckpointer>(*manager_, control_.handle());
  // The node-local level writes on a thread of its own, so that a slow file-system commit in flight
  // never holds back the next local checkpoint (SCR drains beside its fast level the same way).
  if (options_.async && local_) local_writer_ = std::make_unique<AsyncCheckpointer>(*manager_, control_.handle());
  // Rank 0 asks Slurm once; every rank counts down from the same answer on its own clock.
  double left = std::nan("");
  if (control_.is_root())
    if (const auto end = find_job_end(options_.deadline, environment_from_process())) {
      // A duration counts from the process's start, as a Slurm time limit counts from the job's.
      const bool from_start = options_.deadline.mode == DeadlineRequest::Mode::After;
      left = end->seconds_left - (from_start ? process_startup().total_seconds() : 0.0);
      deadline_source_ = end->source;
    }
  control_.broadcast(&left, 1, DType::F64, 0);
  broadcast_string(control_, deadline_source_);
  if (std::isnan(left)) return;
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left));
  spdlog::info(
      "the job ends in {:.0f} s ({}): the last checkpoint will be taken before it, with {:g} s to spare "
      "(--deadline-margin)",
      left, deadline_source_, options_.deadline_margin_s);
}

Checkpointer::~Checkpointer() {
  // The commits' `done` runs on the writer threads and writes members declared after them: the
  // writers must end before any of them goes (an exception unwinding with a commit in flight freed
  // them first). Their own failures, if any, are not the error that is on its way.
  for (auto* writer : {&local_writer_, &async_}) {
    if (!*writer) continue;
    try {
      (*writer)->wait();
    } catch (...) {
    }
    writer->reset();
  }
}

Checkpointer::Resumed Checkpointer::resume(const TrainingStateRefs& state, const std::string& path) {
  Resumed resumed{read_training_state(path, control_, state), path};
  schedule_ = CheckpointSchedule(options_.schedule, resumed.position.step, Clock::now());
  if (!options_.keep_best.empty()) {
    // Rank 0's reading of best.json; a best written after the checkpoint resumed (an abandoned
    // future) does not count.
    double best[2] = {0.0, 0.0};  // {found, value}
    if (control_.is_root())
      if (const auto recorded = CheckpointManager::read_best(options_.directory, options_.keep_best);
          recorded && recorded->step <= resumed.position.step)
        best[0] = 1.0, best[1] = recorded->value;
    control_.broadcast(best, 2, DType::F64, 0);
    if (best[0] != 0.0) {
      best_ = best[1];
      spdlog::info("--keep-best {}: the best so far is {:.6g} (best.json)", options_.keep_best, *best_);
    }
  }
  return resumed;
}

CheckpointDecision Checkpointer::after_step(const TrainingPosition& position, bool last,
                                            const TrainingStateRefs& state) {
  if (!schedule_.enabled()) return {};
  AgreedFlags flags;
  if (!last) {
    // One small all-reduce per step: every rank sees the signal and the clock as rank-wide maxima.
    const auto now = Clock::now();
    std::int64_t raised[4] = {preemption_requested() ? 1 : 0, schedule_.time_due(now) ? 1 : 0,
                              deadline_near(now) ? 1 : 0, local_writer_ && local_writer_->running() ? 1 : 0};
    control_.allreduce(raised, 4, DType::I64, ReduceOp::Max);
    flags = {raised[0] != 0, raised[1] != 0, raised[2] != 0, raised[3] != 0};
  }
  const CheckpointDecision decision = schedule_.decide(position.step, flags, last);
  if (decision.deadline && control_.is_root())
    spdlog::warn("the job ends in {:.0f} s ({}): checkpointing step {} now, while it still fits",
                 std::chrono::duration<double>(*deadline_ - Clock::now()).count(), deadline_source_, position.step);
  const bool keep_best = new_best_.has_value();
  if (decision.save || keep_best)
    save(position, state, /*wait=*/decision.stop || last, /*to_file_system=*/true);
  else if (decision.save_local)
    save(position, state, /*wait=*/false, /*to_file_system=*/false);
  if (last) wait();  // the last commit, and its verdict
  if ((decision.stop || last) && control_.is_root())
    write_stop_reason(options_.directory,
                      last                 ? "complete"
                      : decision.deadline  ? "deadline"
                      : decision.preempted ? (preemption_signal() != 0 ? fmt::format("signal {}", preemption_signal())
                                                                       : std::string("signal"))
                                           : "steps-per-run");
  return decision;
}

bool Checkpointer::deadline_near(Clock::time_point now) {
  if (previous_step_)
    longest_step_s_ = std::max(longest_step_s_, std::chrono::duration<double>(now - *previous_step_).count());
  previous_step_ = now;
  if (!deadline_) return false;
  double commit = 0.0;
  {
    std::lock_guard lock(written_mutex_);
    commit = longest_commit_s_;
  }
  // Another step, then a checkpoint that may take half as long again as the longest so far.
  const double needed = options_.deadline_margin_s + 1.5 * commit + 2.0 * longest_step_s_;
  // In seconds, not clock ticks: a --deadline-margin of 1e300 s is a valid option value, and casting it
  // to the clock's nanoseconds would overflow (undefined; it wrapped to a deadline in the past).
  return needed >= std::chrono::duration<double>(*deadline_ - now).count();
}

void Checkpointer::report_validation(std::int64_t step, double value) {
  if (options_.keep_best.empty() || !manager_ || !std::isfinite(value)) return;
  const bool better = !best_ || (higher_is_better(options_.keep_best) ? value > *best_ : value < *best_);
  if (!better) return;
  best_ = value;
  new_best_ = value;
  spdlog::info("--keep-best {}: {:.6g} at step {} is the best so far", options_.keep_best, value, step);
}

std::string Checkpointer::last_written() const {
  std::lock_guard lock(written_mutex_);
  return last_written_;
}

std::string Checkpointer::best_written() const {
  std::lock_guard lock(written_mutex_);
  return best_written_;
}

CheckpointCosts Checkpointer::costs() const {
  std::lock_guard lock(written_mutex_);
  return costs_;
}

void Checkpointer::wait() {
  if (local_writer_) local_writer_->wait();
  if (async_) async_->wait();
}

void Checkpointer::save(const TrainingPosition& given, const TrainingStateRefs& state, bool wait, bool to_file_system) {
  const auto started = Clock::now();
  TrainingPosition position = given;
  before_save_(position);
  const bool background = async_ != nullptr;
  // One commit at a time per level; a failed one is reported here.
  if (local_writer_) local_writer_->wait();
  if (background && to_file_system) async_->wait();
  std::shared_ptr<const StateSnapshot> snapshot;
  {
    const timeline::ScopedSpan span("checkpoint", timeline::enabled()
                                                      ? fmt::format("checkpoint snapshot (step {})", position.step)
                                                      : std::string());
    snapshot = std::make_shared<const StateSnapshot>(
        take_snapshot(control_, state, position, options_.config_ini, /*copy=*/background));
  }
  const std::int64_t step = position.step;
  schedule_.saved(step, Clock::now(), /*local=*/!to_file_system);
  if (local_) {
    bool first = false;
    {
      std::lock_guard lock(written_mutex_);
      first = costs_.local.count + costs_.file_system.count == 0;
    }
    // Runs on the local writer's thread when asynchronous: it touches the snapshot and the level only.
    auto write_local = [this, snapshot, step, first](MpiComm&) {
      const auto begin = Clock::now();
      local_->write(step, {[&](ParallelCheckpointWriter& writer) {
                             if (options_.local.sharded)
                               write_snapshot_base(writer, *snapshot);
                             else
                               write_snapshot(writer, *snapshot);
                           },
                           [&](ParallelCheckpointWriter& writer) { write_snapshot_own_shares(writer, *snapshot); }});
      const double took = seconds_since(begin);
      if (first)
        spdlog::info("node-local checkpoint of step {} written to '{}' in {:.3f} s (then every {} steps, quietly)",
                     step, local_->directory(), took, options_.schedule.local_interval);
      else
        spdlog::debug("node-local checkpoint of step {} written in {:.3f} s", step, took);
      std::lock_guard lock(written_mutex_);
      ++costs_.local.commits;
      costs_.local.commit_s += took;
    };
    if (local_writer_)
      local_writer_->run(std::move(write_local));
    else
      write_local(control_);
  }
  if (to_file_system) {
    // Runs on the writing thread when asynchronous: it touches the snapshot and the fault hooks only.
    auto write = [this, snapshot, step](ParallelCheckpointWriter& writer) {
      faults_.before_checkpoint_write(step, options_.directory);
      write_snapshot(writer, *snapshot);
      faults_.after_checkpoint_arrays(step);
    };
    std::optional<double> best = std::exchange(new_best_, std::nullopt);
    auto done = [this, step, started, background, best](const std::string& path) {
      faults_.after_checkpoint_commit(step, path);
      std::string best_path;
      if (best && control_.is_root()) {
        best_path = manager_->keep_as_best(path, options_.keep_best, *best, step);
        spdlog::info("--keep-best {}: '{}' kept as {}", options_.keep_best, path, CheckpointManager::kBestFile);
      }
      {
        std::lock_guard lock(written_mutex_);
        last_written_ = path;
        if (!best_path.empty()) best_written_ = best_path;
        longest_commit_s_ = std::max(longest_commit_s_, seconds_since(started));
        ++costs_.file_system.commits;
        costs_.file_system.commit_s += seconds_since(started);
      }
      spdlog::info("checkpoint '{}' written in {:.2f} s{}", path, seconds_since(started),
                   background ? " (beside training)" : "");
    };
    if (background)
      async_->start(step, snapshot->bytes(), std::move(write), std::move(done));
    else
      done(manager_->save(step, snapshot->bytes(), write, control_));
  }
  if (background)
    spdlog::debug("step {}: training blocked {:.3f} s by the checkpoint's snapshot", step, seconds_since(started));
  {
    std::lock_guard lock(written_mutex_);
    CheckpointCosts::Level& level = to_file_system ? costs_.file_system : costs_.local;
    ++level.count;
    level.blocked_s += seconds_since(started);
  }
  if (wait) this->wait();
}

}  // namespace mnddp
