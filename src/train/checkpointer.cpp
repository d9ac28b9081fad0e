// Checkpointing for the trainer: resume, schedule agreement, snapshot and commit.
#include "mnddp/train/checkpointer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <utility>

#include "mnddp/observe/timeline.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/task/metric.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

Checkpointer::Checkpointer(CheckpointerOptions options, MpiComm& control, const FaultHooks& faults,
                           std::function<void()> sync_replicas)
    : options_(std::move(options)),
      control_(control),
      faults_(faults),
      sync_replicas_(std::move(sync_replicas)),
      schedule_(options_.schedule, 0, Clock::now()) {
  if (options_.directory.empty()) return;
  manager_ = std::make_unique<CheckpointManager>(options_.directory, options_.keep_last, control_);
  if (options_.async) async_ = std::make_unique<AsyncCheckpointer>(*manager_, control_.handle());
}

Checkpointer::~Checkpointer() = default;

std::optional<Checkpointer::Resumed> Checkpointer::resume(const TrainingStateRefs& state) {
  const std::string path = CheckpointManager::resolve_resume(control_, options_.directory, options_.resume);
  if (path.empty()) {
    if (options_.resume.mode == ResumeFrom::Mode::Auto && !options_.directory.empty())
      spdlog::info("no checkpoint in '{}': starting from scratch", options_.directory);
    return std::nullopt;
  }
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
    std::int64_t raised[2] = {preemption_requested() ? 1 : 0, schedule_.time_due(Clock::now()) ? 1 : 0};
    control_.allreduce(raised, 2, DType::I64, ReduceOp::Max);
    flags = {raised[0] != 0, raised[1] != 0};
  }
  const CheckpointDecision decision = schedule_.decide(position.step, flags, last);
  const bool keep_best = new_best_.has_value();
  if (decision.save || keep_best) save(position, state, /*wait=*/decision.stop || last);
  if (last) wait();  // the last commit, and its verdict
  return decision;
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

void Checkpointer::wait() {
  if (async_) async_->wait();
}

void Checkpointer::save(const TrainingPosition& position, const TrainingStateRefs& state, bool wait) {
  const auto started = Clock::now();
  sync_replicas_();
  const bool background = async_ != nullptr;
  if (background) async_->wait();  // one commit at a time; a failed one is reported here
  std::shared_ptr<const StateSnapshot> snapshot;
  {
    const timeline::ScopedSpan span("checkpoint", timeline::enabled()
                                                      ? fmt::format("checkpoint snapshot (step {})", position.step)
                                                      : std::string());
    snapshot = std::make_shared<const StateSnapshot>(
        take_snapshot(control_, state, position, options_.config_ini, /*copy=*/background));
  }
  const std::int64_t step = position.step;
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
    }
    spdlog::info("checkpoint '{}' written in {:.2f} s{}", path, seconds_since(started),
                 background ? " (beside training)" : "");
  };
  schedule_.saved(step, Clock::now());
  if (!background) {
    done(manager_->save(step, snapshot->bytes(), write, control_));
    return;
  }
  async_->start(step, snapshot->bytes(), std::move(write), std::move(done));
  spdlog::debug("step {}: training blocked {:.3f} s by the checkpoint's snapshot", step, seconds_since(started));
  if (wait) async_->wait();
}

}  // namespace mnddp
