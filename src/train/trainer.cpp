// The training loop, in layers: run() (epochs, the final checkpoint) → train_epoch() (a loader,
// steps, validation, checkpoints) → train_step() (micro-batches, then the update) → forward_backward()
// (one micro-batch). Everything it drives is built by training_setup.cpp.
#include "mnddp/train/trainer.hpp"

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <limits>
#include <optional>

#include "device_step.hpp"
#include "mnddp/amp/autocast.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/parameter_fingerprint.hpp"
#include "mnddp/error.hpp"
#include "mnddp/host_waits.hpp"
#include "mnddp/observe/resources.hpp"
#include "mnddp/observe/run_observer.hpp"
#include "mnddp/observe/startup_breakdown.hpp"
#include "mnddp/optim/checks_gradients.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/progress.hpp"
#include "mnddp/train/batch_source.hpp"
#include "mnddp/train/device_batch.hpp"
#include "mnddp/train/gradient_check.hpp"
#include "training_run.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

// The most GPU memory torch's caching allocator held for tensors on `device` (0 on the CPU).
double peak_gpu_mib(c10::Device device) {
  if (!device.is_cuda()) return 0.0;
  const auto stats = c10::getDeviceAllocator(c10::kCUDA)->getDeviceStats(device.index());
  const auto aggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1024.0 * 1024.0);
}

}  // namespace

Trainer::Trainer(const TrainingConfig& config, const RankInfo& rank, MpiComm& control, GradientCommWrapper wrap)
    : run_(set_up_training(config, rank, control, std::move(wrap))) {
  const TrainingRun& r = *run_;
  const TrainingConfig& c = r.config;  // with the batch shape a resume kept
  spdlog::info("task {}, model {}: {} parameters; {} training samples in {} shards, sample shape [{}]",
               choice_name(c.task), c.model.text(), parameter_count(*r.model), r.data.train_index.num_samples(),
               r.data.train_index.shards.size(), fmt::join(r.data.train_index.sample_shape, ", "));
  spdlog::info("global batch {} = {} ranks x {} x {} accumulation; {} steps per epoch, {} steps in all",
               r.samples_per_step(), rank.world_size, c.batch_size, c.grad_accum_steps, r.data.steps.steps_per_epoch,
               r.data.steps.total_steps);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return run_->model->parameters(); }

std::vector<at::Tensor> Trainer::buffers() const { return run_->model->buffers(); }

std::string Trainer::device_description() const { return run_->device.description; }

std::string Trainer::backend() const { return std::string(choice_name(run_->backend)); }

TrainResult Trainer::run() {
  TrainingRun& r = *run_;
  TrainResult result;
  result.total_steps = r.data.steps.total_steps;
  std::int64_t step = r.start.step;
  if (step >= r.data.steps.total_steps) {
    result.already_complete = true;
    result.steps = step;
    return result;
  }
  end_epoch_ = r.start.epoch;
  end_micro_batches_ = r.start.global_batches_done;
  r.model->train();
  const progress::Watched watched;  // from here a rank where nothing moves is a hang (progress.hpp)
  r.observers.run_started(
      {step, r.data.steps.total_steps, r.data.steps.steps_per_epoch, r.samples_per_step(), r.rank.world_size});
  for (std::int64_t epoch = r.start.epoch; epoch < r.config.epochs && step < r.data.steps.total_steps; ++epoch) {
    result.epochs = epoch + 1;
    const EpochEnd end = train_epoch(epoch, step, result);
    if (!end.stop) continue;
    result.preempted = end.preempted;
    result.stopped_early = !end.preempted;
    if (end.preempted && preemption_requested())
      spdlog::warn("preemption signal {}: checkpointed at step {}; exiting with code {}", preemption_signal(), step,
                   kExitPreempted);
    else if (end.preempted)
      spdlog::warn("the job's end is near (--deadline): checkpointed at step {}; exiting with code {}", step,
                   kExitPreempted);
    else
      spdlog::info("--steps-per-run {} reached: checkpointed at step {}", r.config.steps_per_run, step);
    result.steps = step;
    finish(result);
    return result;
  }
  // The final state is always kept when checkpointing (unless this step was just saved).
  const auto begin = Clock::now();
  r.checkpointer->after_step({step, end_epoch_, end_micro_batches_, r.rank.world_size, r.config.batch_size,
                              r.config.grad_accum_steps, r.log->interval_loss(), r.log->interval_steps()},
                             /*last=*/true, r.state_refs());
  r.observers.checkpoint_blocked(step, begin, Clock::now());
  result.steps = step;
  result.peak_gpu_mib = peak_gpu_mib(r.device.device);
  if (result.peak_gpu_mib > 0) spdlog::info("peak GPU memory: {:.0f} MiB allocated", result.peak_gpu_mib);
  finish(result);
  return result;
}

void Trainer::finish(const TrainResult& result) {
  TrainingRun& r = *run_;
  r.checkpointer->wait();  // the outcome names the last commit
  r.observers.run_finished({result.steps, result.preempted, result.stopped_early, r.checkpointer->last_written(),
                            r.checkpointer->best_written(), r.checkpointer->costs(),
                            peak_gpu_mib(r.device.device) * 1024.0 * 1024.0});
}

Trainer::EpochEnd Trainer::train_epoch(std::int64_t epoch, std::int64_t& step, TrainResult& result) {
  TrainingRun& r = *run_;
  const TrainingConfig& c = r.config;
  const std::int64_t accum = c.grad_accum_steps;
  const std::int64_t per_epoch = r.data.steps.steps_per_epoch;
  // A resumed epoch skips the global batches already consumed; each rank drops its slice of them.
  const std::int64_t done = epoch == r.start.epoch ? r.start.global_batches_done : 0;
  auto indices = r.data.sampler->epoch_indices_from(epoch, done);
  indices.resize(static_cast<std::size_t>((per_epoch * accum - done) * c.batch_size));
  LoaderOptions loading = r.data.loading;
  loading.before_batch = r.faults.loader_hook(step, c.grad_accum_steps);
  Loader loader(*r.data.train_reader, std::move(indices), c.batch_size, loading);
  BatchSource batches(loader, r.device.device);  // after the loader: it goes first

  auto position = [&](std::int64_t at_epoch, std::int64_t batches_done) {
    return TrainingPosition{step,         at_epoch, batches_done,           r.rank.world_size,
                            c.batch_size, accum,    r.log->interval_loss(), r.log->interval_steps()};
  };
  EpochEnd end;
  std::int64_t epoch_step = done / accum;
  for (; epoch_step < per_epoch && step < r.data.steps.total_steps; ++epoch_step) {
    const double lr = scheduled_lr(c, step, r.data.steps.total_steps);
    const auto step_begin = Clock::now();
    const std::uint64_t waits_before = host_waits();
    train_step(batches, step + 1, lr);
    r.log->add_host_waits(host_waits() - waits_before);
    ++step;
    progress::note();
    r.observers.step_finished(step, epoch, step_begin, Clock::now());
    if (step % c.log_interval == 0 || step == r.data.steps.total_steps) {
      const Activity reporting(fmt::format("the log interval's report after step {}", step));
      settle_ledger(r, step);  // a GPU's losses and verdicts, read once per interval
      const double scale = r.scaler->enabled() ? r.scaler->current_scale() : 0.0;
      const StepMetrics interval =
          r.log->report(step, epoch, lr, scale, step == r.data.steps.total_steps, r.control, r.faults);
      result.last_train_loss = interval.loss;
      r.observers.interval(interval);
    }
    // The epoch's last step validates and checkpoints below.
    if (epoch_step + 1 == per_epoch) continue;
    if (c.eval_interval > 0 && step % c.eval_interval == 0 && step < r.data.steps.total_steps)
      evaluate(step, epoch, result);  // the run's last step validates after the loop
    const CheckpointDecision decision = checkpoint_after_step(position(epoch, (epoch_step + 1) * accum));
    if (decision.stop) {
      log_resources(step);
      return {true, decision.preempted};
    }
  }
  evaluate(step, epoch, result);
  // Where a resume continues (the final checkpoint's position): --max-steps may end mid-epoch, and a
  // later run with a larger --max-steps goes on from there.
  end_epoch_ = epoch_step == per_epoch ? epoch + 1 : epoch;
  end_micro_batches_ = epoch_step == per_epoch ? 0 : epoch_step * accum;
  if (epoch_step == per_epoch) {
    const CheckpointDecision decision = checkpoint_after_step(position(epoch + 1, 0));
    end = {decision.stop, decision.preempted};
  }
  log_resources(step);  // the epoch's loaders, evaluation and checkpoint are all closed by now
  return end;
}

void Trainer::train_step(BatchSource& batches, std::int64_t step, double lr) {
  TrainingRun& r = *run_;
  const int accum = r.config.grad_accum_steps;
  Activity::set_step(step);
  const Activity stepping(fmt::format("training step {}", step));
  set_learning_rate(*r.optimizer, lr);
  r.ddp->zero_grad();  // not the optimizer's: DDP knows which gradients are views of its buckets
  r.faults.at_step_start(step);
  double step_loss = 0.0;  // on the CPU; a GPU's stays on the device (r.ledger)
  for (int micro = 0; micro < accum; ++micro) {
    // What the data costs the step: waiting for the loader (on a GPU, for a batch staged ahead).
    const BatchSource::Batch batch = [&] {
      const PhaseTimer timer(r.observers, StepPhase::DataWait);
      std::optional<BatchSource::Batch> next = batches.next();
      if (!next) throw Error("loader ended before the planned number of batches (internal error)");
      return std::move(*next);
    }();
    if (process_startup().finish("first batch"))  // once per process: start-up ends with the first batch
      spdlog::debug("start-up: {}", process_startup().describe());
    // Dropout masks follow the samples (seed, step, sample index), not the rank that sees them.
    r.model->sample_randomness().set_batch(static_cast<std::uint64_t>(r.config.seed), step, batch.ids);
    // Only the last micro-step of an accumulation communicates.
    const at::Tensor loss = forward_backward(batch.tensors, step, micro + 1 == accum);
    if (r.ledger) {
      r.ledger->add_micro_loss(loss, accum);
    } else {
      step_loss += loss.item<double>() / accum;
    }
  }
  {
    const PhaseTimer timer(r.observers, StepPhase::ExposedComm);
    r.ddp->finalize();
  }
  const PhaseTimer timer(r.observers, StepPhase::Optimizer);
  if (r.ledger) {
    apply_gradients_on_device(r, step);
    r.log->count_step();
    return;
  }
  apply_gradients(step, step_loss);
  r.log->add_step(step_loss);
}

at::Tensor Trainer::forward_backward(const DeviceBatch& batch, std::int64_t step, bool synchronise) {
  TrainingRun& r = *run_;
  std::optional<DistributedDataParallel::NoSync> local_only;
  if (!synchronise) local_only.emplace(r.ddp->reducer());
  at::Tensor loss;
  {
    const PhaseTimer timer(r.observers, StepPhase::Forward);
    r.ddp->before_forward();  // the buffers' broadcast, as PyTorch's DDP does in its forward
    const TaskBatch io = r.task->split(batch);
    AutocastScope autocast(r.config.amp, r.device.device.type());
    loss = r.task->loss(r.model->forward(io.input), io.target);
  }
  if (r.faults.poisons_loss(step)) loss = loss * std::numeric_limits<float>::quiet_NaN();
  const PhaseTimer timer(r.observers, StepPhase::Backward);
  at::Tensor scaled = r.ddp->scale_loss(r.scaler->scale(loss / r.config.grad_accum_steps));
  if (synchronise) r.ddp->prepare_for_backward(scaled);
  scaled.backward();
  return loss.detach();
}

void Trainer::apply_gradients(std::int64_t step, double step_loss) {
  TrainingRun& r = *run_;
  if (r.zero) return apply_sharded_gradients(step, step_loss);
  // Gradients are identical on every rank now, so every rank takes (or skips) the same step.
  const bool check = !r.scaler->enabled();
  // --on-nonfinite abort with host SGD or AdamW: the optimizer's one pass reads every gradient anyway
  // and tells afterwards (the parameters it wrote are then dropped with the run). Skip must know before.
  auto* checking_optimizer = check && r.config.on_nonfinite == NonfiniteGradients::Abort && r.device.device.is_cpu()
                                 ? dynamic_cast<ChecksGradients*>(r.optimizer.get())
                                 : nullptr;
  if (check && checking_optimizer == nullptr &&
      !gradients_finite(r.model->parameters(), step, step_loss, r.config.on_nonfinite, r.control)) {
    ++r.skipped_steps;  // --on-nonfinite skip (abort has thrown)
    r.ddp->zero_grad();
  } else if (r.scaler->unscale(r.model->parameters())) {
    if (r.config.grad_clip > 0.0) torch::nn::utils::clip_grad_norm_(r.model->parameters(), r.config.grad_clip);
    r.optimizer->step();
    if (checking_optimizer != nullptr && checking_optimizer->nonfinite_seen())
      nonfinite_gradients_found(step, step_loss, r.config.on_nonfinite, r.control);  // throws
  } else {
    ++r.skipped_steps;
    spdlog::warn("step {}: inf/NaN gradients under fp16 loss scale {}; step skipped", step, r.scaler->current_scale());
  }
  r.scaler->update();
  if (r.faults.drifts_replica(step)) flip_mantissa_bit(r.model->parameters().front());
}

// --zero 1|2: the same policy over this rank's pieces, with every verdict (finite, overflow) and the
// clipping norm made collective; the step updates the pieces, and the all-gather the replicas.
void Trainer::apply_sharded_gradients(std::int64_t step, double step_loss) {
  TrainingRun& r = *run_;
  ZeroPartition& zero = *r.zero;
  const std::vector<at::Tensor>& pieces = zero.bind_gradients();
  if (!r.scaler->enabled() && !zero.gradients_finite()) {
    nonfinite_gradients_found(step, step_loss, r.config.on_nonfinite, r.control);  // throws for abort
    ++r.skipped_steps;
    r.ddp->zero_grad();
  } else if (r.scaler->unscale(pieces, r.gradient_comm.get())) {
    if (r.config.grad_clip > 0.0) zero.clip_grad_norm(r.config.grad_clip);
    r.optimizer->step();
    zero.all_gather_parameters();
  } else {
    ++r.skipped_steps;
    spdlog::warn("step {}: inf/NaN gradients under fp16 loss scale {}; step skipped", step, r.scaler->current_scale());
  }
  zero.release_gradients();
  r.scaler->update();
  if (r.faults.drifts_replica(step)) flip_mantissa_bit(r.model->parameters().front());
}

void Trainer::evaluate(std::int64_t step, std::int64_t epoch, TrainResult& result) {
  TrainingRun& r = *run_;
  if (!r.evaluator) return;
  const Activity validating(fmt::format("validation after step {}", step));
  const auto begin = Clock::now();
  r.observers.validation_started(step);
  r.ddp->sync_buffers();  // one model on every rank: rank 0's BatchNorm statistics
  const EvalResult eval = r.evaluator->run(*r.model);
  r.observers.validated({step, epoch, eval.metrics, eval.samples}, eval.headline, begin, Clock::now());
  r.log->report(step, epoch, eval);
  if (!r.config.keep_best.empty())
    r.checkpointer->report_validation(step, metric_value(eval.metrics, r.config.keep_best));
  result.evaluated = true;
  result.val_metrics = eval.metrics;
  result.val_headline = eval.headline;
  result.val_samples = eval.samples;
}

CheckpointDecision Trainer::checkpoint_after_step(const TrainingPosition& position) {
  TrainingRun& r = *run_;
  const Activity checkpointing(fmt::format("checkpoint after step {}", position.step));
  const auto begin = Clock::now();
  const CheckpointDecision decision = r.checkpointer->after_step(position, false, r.state_refs());
  r.observers.checkpoint_blocked(position.step, begin, Clock::now());
  return decision;
}

void Trainer::log_resources(std::int64_t step) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  run_->checkpointer->wait();  // counted with no checkpoint in flight (its thread and file come and go)
  spdlog::debug("step {}: resources: {}", step, to_string(count_resources()));
}

}  // namespace mnddp
