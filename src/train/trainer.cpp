// The training loop: micro-batches -> forward (optionally under autocast) -> loss -> backward ->
// gradient all-reduce -> clip -> optimizer step -> schedule -> metrics; validation after each epoch.
#include "mnddp/train/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <chrono>
#include <csignal>
#include <optional>

#include "mnddp/ckpt/async_checkpointer.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/error.hpp"
#include "mnddp/fault_injection.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/observe/metrics.hpp"
#include "mnddp/observe/resources.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/train/device.hpp"
#include "mnddp/train/loss_scaler.hpp"
#include "mnddp/train/optim.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Autocast for the forward pass only, as torch.autocast does; restores the previous state.
class AutocastScope {
 public:
  AutocastScope(const std::string& amp, c10::DeviceType device) : device_(device) {
    if (amp == "off") return;
    previous_enabled_ = at::autocast::is_autocast_enabled(device_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, amp == "bf16" ? at::kBFloat16 : at::kHalf);
    active_ = true;
  }
  ~AutocastScope() {
    if (!active_) return;
    at::autocast::set_autocast_enabled(device_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace

struct Trainer::State {
  TrainingConfig config;
  RankInfo rank;
  MpiComm& comm;  // control: metrics, validation counts, agreement, checkpoint I/O
  DeviceChoice device;
  std::string backend;                          // what carries gradients: mpi | nccl
  std::shared_ptr<Communicator> gradient_comm;  // NCCL when chosen; else `comm` carries gradients

  ShardIndex train_index;
  std::optional<ShardIndex> val_index;
  std::unique_ptr<H5Reader> train_reader;
  std::unique_ptr<H5Reader> val_reader;
  std::unique_ptr<DistributedSampler> sampler;

  std::shared_ptr<Classifier> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LossScaler> scaler;  // enabled for --amp fp16
  std::int64_t skipped_steps = 0;      // steps skipped for inf/NaN gradients (fp16)
  MetricsWriter metrics;

  LoaderOptions loading;  // transforms shared by training and validation
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;

  std::unique_ptr<CheckpointManager> checkpoints;        // when --checkpoint-dir is set
  std::unique_ptr<AsyncCheckpointer> async_checkpoints;  // and --checkpoint-async
  TrainingPosition start;                                // where run() begins (from --resume)
  FaultPlan fault;                                       // --inject-fault
  std::int64_t last_saved_step = -1;
  Clock::time_point last_save_time = Clock::now();

  State(const TrainingConfig& c, const RankInfo& r, MpiComm& m)
      : config(c), rank(r), comm(m), metrics(r.is_root() ? c.metrics_file : std::string()) {}

  void set_up();
  void resume_if_asked();
  TrainingStateRefs state_refs();
  // Collective: whether to checkpoint after this step (interval, time, or a preemption signal on
  // any rank). Sets `preempted` when a signal is the reason.
  bool checkpoint_due(std::int64_t step, bool& preempted);
  // --inject-fault faults that strike at the start of a step.
  void inject_step_faults(std::int64_t step);
  void log_resources(std::int64_t step);  // --log-level debug: file descriptors, threads, communicators
  // Without the fp16 scaler: whether the (all-reduced, so identical) gradients are finite. If not,
  // --on-nonfinite abort throws a collective error naming the step and every rank's loss; skip warns.
  bool gradients_finite(std::int64_t step, double step_loss);
  // Collective. With --checkpoint-async the commit runs beside training; `wait` waits for it (a
  // preemption stop, the end of training).
  void save(const TrainingPosition& position, bool wait = false);
  at::Tensor to_tensor(const HostBatch& batch, at::Tensor& labels) const;
  void evaluate(std::int64_t step, std::int64_t epoch, TrainResult& result);
};

void Trainer::State::set_up() {
  fault = parse_fault_plan(config.inject_fault);
  if (config.steps_per_run > 0 && config.checkpoint_dir.empty())
    throw UsageError(fmt::format("--steps-per-run {}: needs --checkpoint-dir, or the next run could not continue",
                                 config.steps_per_run));
  if (config.amp == "fp16" && device.device.is_cpu())
    throw UsageError("--amp fp16: float16 autocast needs a CUDA device; use --amp bf16 on CPU");

  // Metadata: rank 0 scans the shards once; everyone gets the broadcast index.
  train_index = scan_shards_collective(comm, config.train_data, "--train-data", config.x_name, config.y_name);
  if (!config.val_data.empty()) {
    val_index = scan_shards_collective(comm, config.val_data, "--val-data", config.x_name, config.y_name);
    if (val_index->sample_shape != train_index.sample_shape)
      throw UsageError(fmt::format("--val-data: samples shaped [{}] but the training samples are [{}]",
                                   fmt::join(val_index->sample_shape, ", "),
                                   fmt::join(train_index.sample_shape, ", ")));
  }

  // Everything below is deterministic given the broadcast metadata, so it fails (or not) on every
  // rank alike; the caller agrees on the verdict.
  check_label_range(train_index, config.num_classes, "--num-classes");
  if (val_index) check_label_range(*val_index, config.num_classes, "--num-classes");
  SamplerOptions sampling;
  sampling.num_samples = train_index.num_samples();
  sampling.world_size = rank.world_size;
  sampling.rank = rank.rank;
  sampling.batch_size = config.batch_size;
  sampling.seed = static_cast<std::uint64_t>(config.seed);
  sampling.shuffle = config.shuffle;
  sampling.drop_last = config.drop_last;
  sampling.mode = parse_partition_mode(config.partition, "--partition");
  sampling.shard_sizes = train_index.shard_sizes();
  sampling.shuffle_buffer = config.shuffle_buffer;
  sampler = std::make_unique<DistributedSampler>(sampling);
  steps_per_epoch = sampler->batches_per_epoch() / config.grad_accum_steps;
  if (steps_per_epoch < 1)
    throw UsageError(fmt::format("--grad-accum-steps {}: an epoch has only {} micro-batches per rank",
                                 config.grad_accum_steps, sampler->batches_per_epoch()));
  total_steps = steps_per_epoch * config.epochs;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);

  // Same seed everywhere for initialisation (then rank 0's weights are broadcast anyway); a
  // per-rank stream afterwards so dropout masks differ between ranks, as their data does.
  torch::manual_seed(static_cast<std::uint64_t>(config.seed));
  ModelSpec spec;
  spec.name = config.model;
  spec.input_shape = train_index.sample_shape;
  spec.num_classes = config.num_classes;
  spec.hidden = config.hidden;
  spec.layers = config.layers;
  spec.dropout = config.dropout;
  model = make_model(spec);
  model->to(device.device);
  torch::manual_seed(static_cast<std::uint64_t>(config.seed) * 1000003ULL + static_cast<std::uint64_t>(rank.rank));

  const H5ReaderOptions reading{parse_nonfinite_policy(config.nonfinite_inputs, "--nonfinite-inputs"),
                                config.batch_size};
  train_reader = std::make_unique<H5Reader>(train_index, reading);
  if (val_index) val_reader = std::make_unique<H5Reader>(*val_index, reading);
  loading.prefetch_batches = config.prefetch_batches;
  loading.transforms.scale_uint8 = config.scale_uint8;
  if (!config.feature_stats.empty())
    loading.transforms.feature_stats = load_feature_stats(config.feature_stats, train_index.sample_numel());
}

at::Tensor Trainer::State::to_tensor(const HostBatch& batch, at::Tensor& labels) const {
  // On CPU the tensors borrow the batch's memory (no copy): the caller keeps the batch alive until
  // backward is done. On a GPU the batch goes through pinned memory, so the copy to the device is
  // asynchronous and overlaps with work already queued on the stream.
  auto x = at::from_blob(const_cast<float*>(batch.x.data()), batch.shape, at::kFloat);
  auto y = at::from_blob(const_cast<std::int64_t*>(batch.y.data()), {batch.size}, at::kLong);
  if (device.device.is_cpu()) {
    labels = y;
    return x;
  }
  labels = y.pin_memory().to(device.device, /*non_blocking=*/true);
  return x.pin_memory().to(device.device, /*non_blocking=*/true);
}

void Trainer::State::evaluate(std::int64_t step, std::int64_t epoch, TrainResult& result) {
  if (!val_reader) return;
  torch::NoGradGuard no_grad;
  ddp->sync_buffers();  // one model on every rank: rank 0's BatchNorm statistics
  model->eval();
  const auto indices = eval_indices(val_index->num_samples(), rank.world_size, rank.rank);
  // Sums over this rank's share; every sample of the validation set is counted exactly once.
  double totals[3] = {0.0, 0.0, 0.0};  // correct, loss sum, samples
  Loader loader(*val_reader, indices, config.batch_size, loading);
  while (auto batch = loader.next()) {
    at::Tensor labels;
    at::Tensor x = to_tensor(*batch, labels);
    at::Tensor logits;
    {
      AutocastScope autocast(config.amp, device.device.type());
      logits = model->forward(x);
    }
    logits = logits.to(at::kFloat);
    namespace F = torch::nn::functional;
    totals[0] += logits.argmax(1).eq(labels).sum().item<double>();
    totals[1] += F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    totals[2] += static_cast<double>(batch->size);
  }
  comm.allreduce(totals, 3, DType::F64, ReduceOp::Sum);
  model->train();
  result.evaluated = true;
  result.val_samples = static_cast<std::int64_t>(totals[2]);
  result.val_accuracy = totals[2] > 0 ? totals[0] / totals[2] : 0.0;
  result.val_loss = totals[2] > 0 ? totals[1] / totals[2] : 0.0;
  spdlog::info("epoch {} step {}: validation accuracy {:.4f}, loss {:.4f} ({} samples)", epoch, step,
               result.val_accuracy, result.val_loss, result.val_samples);
  metrics.write(EvalMetrics{step, epoch, result.val_loss, result.val_accuracy, result.val_samples});
}

void Trainer::State::log_resources(std::int64_t step) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  // Counted with no checkpoint in flight (its thread and file would come and go).
  if (async_checkpoints) async_checkpoints->wait();
  spdlog::debug("step {}: resources: {}", step, to_string(count_resources()));
}

TrainingStateRefs Trainer::State::state_refs() {
  return TrainingStateRefs{*model, *optimizer, config.optimizer, *scaler, device.device, train_index.sample_shape};
}

void Trainer::State::resume_if_asked() {
  const std::string path = CheckpointManager::resolve_resume(comm, config.checkpoint_dir, config.resume);
  if (path.empty()) {
    if (config.resume == "auto" && !config.checkpoint_dir.empty())
      spdlog::info("no checkpoint in '{}': starting from scratch", config.checkpoint_dir);
    return;
  }
  start = read_training_state(path, comm, state_refs());
  if (config.partition == "shard" && start.world_size != rank.world_size)
    throw UsageError(
        fmt::format("--resume '{}': written by {} ranks, resumed by {}; --partition shard assigns files "
                    "by world size, so its order cannot continue (use the same number of ranks, or "
                    "--partition sample)",
                    path, start.world_size, rank.world_size));
  last_saved_step = start.step;
  const std::int64_t global_batch = rank.world_size * config.batch_size;
  if (start.world_size * start.batch_size != global_batch)
    spdlog::warn(
        "resuming '{}' with a global batch of {} where it was written with {} ({} ranks x {}): the sample "
        "order from here on differs from the original run",
        path, global_batch, start.world_size * start.batch_size, start.world_size, start.batch_size);
  spdlog::info("resumed from '{}': step {}, epoch {}, {} global batches into the epoch (written by {} ranks)", path,
               start.step, start.epoch, start.global_batches_done, start.world_size);
}

bool Trainer::State::checkpoint_due(std::int64_t step, bool& preempted) {
  if (!checkpoints) return false;
  const bool interval = config.checkpoint_interval > 0 && step % config.checkpoint_interval == 0;
  const bool time = config.checkpoint_minutes > 0 && seconds_since(last_save_time) >= config.checkpoint_minutes * 60.0;
  // One small all-reduce per step: every rank sees the signal and the clock as rank-wide maxima.
  std::int64_t flags[2] = {preemption_requested() ? 1 : 0, time ? 1 : 0};
  comm.allreduce(flags, 2, DType::I64, ReduceOp::Max);
  preempted = flags[0] != 0;
  return interval || flags[1] != 0 || preempted;
}

void Trainer::State::inject_step_faults(std::int64_t step) {
  if (!fault.active()) return;
  if (fault.hits("crash", step, rank.rank)) {
    announce_fault(fault, rank.where(), "killing this rank (SIGKILL)");
    std::raise(SIGKILL);
  }
  if (fault.hits("hang", step, rank.rank)) {
    announce_fault(fault, rank.where(), "this rank stops before the step's collectives");
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (fault.hits_from("slow", step, rank.rank)) {
    if (fault.step == step) announce_fault(fault, rank.where(), "this rank sleeps 0.5 s in every step from now on");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

bool Trainer::State::gradients_finite(std::int64_t step, double step_loss) {
  std::vector<at::Tensor> checks;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) checks.push_back(at::isfinite(p.grad()).all());
  if (checks.empty() || at::stack(checks).all().item<bool>()) return true;
  // Every rank is here (the gradients are the same everywhere): name each rank's loss.
  std::vector<double> losses(static_cast<std::size_t>(rank.world_size));
  comm.allgather(&step_loss, losses.data(), 1, DType::F64);
  std::vector<std::string> parts;
  for (int r = 0; r < rank.world_size; ++r) parts.push_back(fmt::format("{:.4g} on rank {}", losses[r], r));
  const std::string what = fmt::format("step {}: NaN/Inf in the gradients (loss {})", step, fmt::join(parts, ", "));
  if (config.on_nonfinite == "abort")
    throw Error(what + "; stopping (--on-nonfinite abort; 'skip' skips such steps)", kExitFailure,
                /*collective=*/true);
  if (rank.is_root()) spdlog::warn("{}; step skipped (--on-nonfinite skip)", what);
  return false;
}

void Trainer::State::save(const TrainingPosition& position, bool wait) {
  const auto started = Clock::now();
  ddp->sync_buffers();  // every rank writes a share of the same (rank 0's) buffers
  const bool background = async_checkpoints != nullptr;
  if (background) async_checkpoints->wait();  // one commit at a time; a failed one is reported here
  auto snapshot = std::make_shared<const StateSnapshot>(
      take_snapshot(comm, state_refs(), position, to_ini(config), /*copy=*/background));
  const std::int64_t step = position.step;
  // Runs on the writing thread when asynchronous: it touches the snapshot and the fault plan only.
  auto write = [this, snapshot, step](ParallelCheckpointWriter& writer) {
    if (fault.hits("checkpoint-fill", step, rank.rank)) {
      announce_fault(fault, rank.where(), "filling the checkpoint file system");
      fill_file_system(config.checkpoint_dir);
    }
    write_snapshot(writer, *snapshot);
    // Test faults strike after the arrays are written and before the commit: the worst moment.
    if (fault.hits("checkpoint-kill", step, rank.rank)) {
      announce_fault(fault, rank.where(), "SIGKILL in the middle of the checkpoint write");
      std::raise(SIGKILL);
    }
    if (fault.hits("checkpoint-fail", step, rank.rank))
      throw Error(fmt::format("injected fault checkpoint-fail at step {} on rank {}", step, rank.rank));
  };
  auto done = [this, step, started, background](const std::string& path) {
    if (fault.hits("checkpoint-corrupt", step, rank.rank) && rank.is_root()) {
      announce_fault(fault, rank.where(), fmt::format("flipping one byte of '{}' after its commit", path));
      corrupt_checkpoint(path);
    }
    spdlog::info("checkpoint '{}' written in {:.2f} s{}", path, seconds_since(started),
                 background ? " (beside training)" : "");
  };
  last_saved_step = step;
  last_save_time = Clock::now();
  if (!background) {
    done(checkpoints->save(step, snapshot->bytes(), write));
    return;
  }
  async_checkpoints->start(step, snapshot->bytes(), std::move(write), std::move(done));
  spdlog::debug("step {}: training blocked {:.3f} s by the checkpoint's snapshot", step, seconds_since(started));
  if (wait) async_checkpoints->wait();
}

Trainer::Trainer(const TrainingConfig& config, const RankInfo& rank, MpiComm& comm)
    : state_(std::make_unique<State>(config, rank, comm)) {
  State& s = *state_;
  on_all_then_agree(comm, [&] { s.device = select_device(config.device, rank); });
  s.backend = select_backend(config.backend, s.device, rank, comm);
  // Scanning agrees internally; the rest is agreed here so a bad value is one message, not N.
  on_all_then_agree(comm, [&] { s.set_up(); });
  DdpOptions ddp_options;
  ddp_options.broadcast_buffers = config.broadcast_buffers;
  ddp_options.reducer.limits.cap_bytes = static_cast<std::size_t>(config.bucket_cap_mb * 1024 * 1024);
  ddp_options.reducer.limits.first_cap_bytes = static_cast<std::size_t>(config.first_bucket_mb * 1024 * 1024);
  ddp_options.reducer.find_unused_parameters = config.find_unused_parameters;
  ddp_options.reducer.compression = parse_grad_compression(config.grad_compression);
  ddp_options.reducer.loss_prescaled = true;  // backward runs on ddp.scale_loss(loss): no division pass
  s.gradient_comm = make_gradient_comm(s.backend, comm, s.device, config.collective_timeout);
  s.ddp = std::make_unique<DistributedDataParallel>(s.model, s.gradient_comm ? *s.gradient_comm : comm, ddp_options);
  on_all_then_agree(comm, [&] { s.optimizer = make_optimizer(config, s.model->parameters()); });
  LossScalerOptions scaling;
  scaling.enabled = config.amp == "fp16";
  s.scaler = std::make_unique<LossScaler>(scaling, s.device.device);
  std::vector<int> signals;
  on_all_then_agree(comm, [&] { signals = parse_signal_list(config.preempt_signals); });
  if (config.checkpoint_dir.empty()) signals.clear();  // nothing to save: a signal has its usual effect
  if (!config.checkpoint_dir.empty()) {
    s.checkpoints = std::make_unique<CheckpointManager>(config.checkpoint_dir, config.keep_last, comm, comm.handle());
    if (config.checkpoint_async)
      s.async_checkpoints = std::make_unique<AsyncCheckpointer>(config.checkpoint_dir, config.keep_last, comm.handle());
  }
  settle_preemption_signals(signals);
  on_all_then_agree(comm, [&] { s.resume_if_asked(); });

  spdlog::info("model {}: {} parameters; {} training samples in {} shards, sample shape [{}]", config.model,
               parameter_count(*s.model), s.train_index.num_samples(), s.train_index.shards.size(),
               fmt::join(s.train_index.sample_shape, ", "));
  spdlog::info("global batch {} = {} ranks x {} x {} accumulation; {} steps per epoch, {} steps in all",
               config.batch_size * rank.world_size * config.grad_accum_steps, rank.world_size, config.batch_size,
               config.grad_accum_steps, s.steps_per_epoch, s.total_steps);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return state_->model->parameters(); }

std::string Trainer::device_description() const { return state_->device.description; }

std::string Trainer::backend() const { return state_->backend; }

TrainResult Trainer::run() {
  State& s = *state_;
  const TrainingConfig& c = s.config;
  TrainResult result;
  namespace F = torch::nn::functional;

  std::int64_t step = s.start.step;
  double interval_loss = s.start.interval_loss;
  std::int64_t interval_steps = s.start.interval_steps;
  double interval_data_wait = 0.0;
  auto interval_start = Clock::now();
  bool stop = false;       // this invocation ends after the current step (checkpointed)
  bool preempted = false;  // ... because of a preemption signal
  s.model->train();

  for (std::int64_t epoch = s.start.epoch; epoch < c.epochs && step < s.total_steps; ++epoch) {
    result.epochs = epoch + 1;
    // A resumed epoch skips the global batches already consumed; each rank drops its slice of them.
    const std::int64_t done = epoch == s.start.epoch ? s.start.global_batches_done : 0;
    auto indices = s.sampler->epoch_indices_from(epoch, done);
    indices.resize(static_cast<std::size_t>((s.steps_per_epoch * c.grad_accum_steps - done) * c.batch_size));
    LoaderOptions loading = s.loading;
    if (s.fault.kind == "loader-exception") {
      // Batch b of this epoch's loader feeds step first_step + b / grad_accum_steps + 1.
      const std::int64_t first_step = step;
      loading.before_batch = [&s, first_step, accum = c.grad_accum_steps](std::int64_t batch) {
        if (s.fault.hits("loader-exception", first_step + batch / accum + 1, s.rank.rank))
          throw Error(fmt::format("injected fault {}: the data loader's thread failed on rank {}", s.fault.spec(),
                                  s.rank.rank));
      };
    }
    Loader loader(*s.train_reader, std::move(indices), c.batch_size, loading);
    bool save_after_eval = false;

    for (std::int64_t epoch_step = done / c.grad_accum_steps; epoch_step < s.steps_per_epoch && step < s.total_steps;
         ++epoch_step) {
      const double lr = scheduled_lr(c, step, s.total_steps);
      set_learning_rate(*s.optimizer, lr);
      s.ddp->zero_grad();  // in place: gradients are views into the DDP buckets and stay so

      s.inject_step_faults(step + 1);
      double step_loss = 0.0;
      for (int micro = 0; micro < c.grad_accum_steps; ++micro) {
        const auto wait_start = Clock::now();
        auto batch = loader.next();
        interval_data_wait += seconds_since(wait_start);
        if (!batch) throw Error("loader ended before the planned number of batches (internal error)");
        at::Tensor labels;
        at::Tensor x = s.to_tensor(*batch, labels);
        // Only the last micro-step of an accumulation communicates.
        std::optional<DistributedDataParallel::NoSync> local_only;
        if (micro + 1 < c.grad_accum_steps) local_only.emplace(s.ddp->reducer());
        s.ddp->before_forward();
        at::Tensor loss;
        {
          AutocastScope autocast(c.amp, s.device.device.type());
          loss = F::cross_entropy(s.model->forward(x).to(at::kFloat), labels);
        }
        if (s.fault.hits("nan-loss", step + 1, s.rank.rank)) {
          announce_fault(s.fault, s.rank.where(), "this rank's loss becomes NaN");
          loss = loss * std::numeric_limits<float>::quiet_NaN();
        }
        at::Tensor scaled = s.ddp->scale_loss(s.scaler->scale(loss / c.grad_accum_steps));
        if (!local_only) s.ddp->prepare_for_backward(scaled);
        scaled.backward();
        step_loss += loss.item<double>() / c.grad_accum_steps;
      }
      s.ddp->finalize();
      // Gradients are identical on every rank now, so every rank takes (or skips) the same step.
      if (!s.scaler->enabled() && !s.gradients_finite(step + 1, step_loss)) {
        ++s.skipped_steps;  // --on-nonfinite skip (abort has thrown)
        s.ddp->zero_grad();
      } else if (s.scaler->unscale(s.model->parameters())) {
        if (c.grad_clip > 0.0) torch::nn::utils::clip_grad_norm_(s.model->parameters(), c.grad_clip);
        s.optimizer->step();
      } else {
        ++s.skipped_steps;
        spdlog::warn("step {}: inf/NaN gradients under fp16 loss scale {}; step skipped", step + 1,
                     s.scaler->current_scale());
      }
      s.scaler->update();
      ++step;
      ++interval_steps;
      interval_loss += step_loss;

      if (step % c.log_interval == 0 || step == s.total_steps) {
        double sums[2] = {interval_loss, interval_data_wait};
        std::size_t count = 2;
        if (s.fault.hits("desync", step, s.rank.rank)) {
          announce_fault(s.fault, s.rank.where(), "this rank all-reduces 1 metric where the others send 2");
          count = 1;
        }
        const CollectiveLabel label("training metrics");
        s.comm.allreduce(sums, count, DType::F64, ReduceOp::Avg);
        const double elapsed = seconds_since(interval_start);
        StepMetrics m;
        m.step = step;
        m.epoch = epoch;
        m.loss = sums[0] / static_cast<double>(interval_steps);
        m.lr = lr;
        m.step_time_s = elapsed / static_cast<double>(interval_steps);
        m.data_wait_s = sums[1] / static_cast<double>(interval_steps);
        m.samples_per_second =
            static_cast<double>(interval_steps * c.grad_accum_steps * c.batch_size * s.rank.world_size) / elapsed;
        spdlog::info("epoch {} step {}/{}: loss {:.4f} lr {:.3g} {:.0f} samples/s step {:.1f} ms data wait {:.1f} ms",
                     epoch, step, s.total_steps, m.loss, lr, m.samples_per_second, m.step_time_s * 1e3,
                     m.data_wait_s * 1e3);
        s.metrics.write(m);
        result.last_train_loss = m.loss;
        interval_loss = interval_data_wait = 0.0;
        interval_steps = 0;
        interval_start = Clock::now();
      }

      // A preemption signal or the end of --steps-per-run stops this invocation after a checkpoint.
      const bool budget_spent = c.steps_per_run > 0 && step - s.start.step >= c.steps_per_run;
      const bool due = s.checkpoint_due(step, preempted) || budget_spent;
      stop = preempted || budget_spent;
      if (due) {
        if (epoch_step + 1 == s.steps_per_epoch) {
          save_after_eval = true;  // the epoch's validation belongs before the checkpoint
        } else {
          s.save({step, epoch, (epoch_step + 1) * c.grad_accum_steps, s.rank.world_size, c.batch_size, interval_loss,
                  interval_steps});
        }
      }
      if (stop) break;
    }
    const bool epoch_complete = !stop || save_after_eval;
    if (epoch_complete) s.evaluate(step, epoch, result);
    if (save_after_eval) s.save({step, epoch + 1, 0, s.rank.world_size, c.batch_size, interval_loss, interval_steps});
    s.log_resources(step);  // the epoch's loaders, evaluation and checkpoint are all closed by now
    if (stop) {
      result.preempted = preempted;
      result.stopped_early = !preempted;
      if (preempted)
        spdlog::warn("preemption signal {}: checkpointed at step {}; exiting with code {}", preemption_signal(), step,
                     kExitPreempted);
      else
        spdlog::info("--steps-per-run {} reached: checkpointed at step {}", c.steps_per_run, step);
      break;
    }
  }
  // The final state is always kept when checkpointing.
  if (s.checkpoints && !result.preempted && !result.stopped_early && s.last_saved_step != step)
    s.save({step, c.epochs, 0, s.rank.world_size, c.batch_size, interval_loss, interval_steps});
  if (s.async_checkpoints) s.async_checkpoints->wait();  // the last commit, and its verdict
  result.steps = step;
  return result;
}

}  // namespace mnddp
