// Building a training run: device and backend, data, model, DDP, optimizer, checkpointer, resume.
// Each step's failure is agreed across ranks, so bad input ends every rank with one message.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "device_step.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/local_capacity.hpp"
#include "mnddp/comm/backend.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/diagnose/consistency_check.hpp"
#include "mnddp/diagnose/parameter_fingerprint.hpp"
#include "mnddp/diagnose/straggler_watch.hpp"
#include "mnddp/error.hpp"
#include "mnddp/model/memory_layout.hpp"
#include "mnddp/model/sync_batch_norm.hpp"
#include "mnddp/observe/progress_bar.hpp"
#include "mnddp/observe/run_summary.hpp"
#include "mnddp/observe/startup_breakdown.hpp"
#include "mnddp/observe/tensorboard.hpp"
#include "mnddp/observe/trace_observer.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/plan/plan_inputs.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/train/resume_plan.hpp"
#include "training_run.hpp"

namespace mnddp {

std::int64_t largest_token_if_needed(const TrainingConfig& config, const ShardIndex& train, Communicator& control) {
  if (config.task != TaskKind::Lm || config.vocab_size > 0 || is_float_type(train.sample_type)) return -1;
  std::int64_t largest = -1;
  on_root_then_agree(control, [&] {
    spdlog::info("--vocab-size 0: reading every training token to find the largest id (give --vocab-size to skip)");
    const auto [low, high] = scan_input_range(train);
    if (low < 0)
      throw UsageError(
          fmt::format("--train-data: dataset '{}' holds token id {}; token ids must be at least 0", train.x_name, low));
    largest = high;
  });
  control.broadcast(&largest, 1, DType::I64, 0);
  return largest;
}

std::shared_ptr<Model> build_model(const TrainingConfig& config, const std::vector<std::int64_t>& sample_shape,
                                   const Task& task, const DeviceChoice& device, const RankInfo& rank) {
  torch::manual_seed(static_cast<std::uint64_t>(config.seed));
  ModelSpec spec = model_spec(config, task.input_shape(sample_shape), task.output_size());
  spec.token_input = task.kind() == TaskKind::Lm;
  spec.output_shape = task.output_shape();
  spec.output_meaning = task.describe();
  auto model = make_model(spec);
  model->to(device.device);
  if (wants_channels_last(config.memory_format, spec.kind, device.device.is_cpu(), config.deterministic,
                          config.amp != Amp::Off)) {
    const int converted = make_channels_last(*model, config.model.text());
    if (rank.is_root())
      spdlog::info("--memory-format {}: {} weights and their activations channels-last (NHWC)",
                   choice_name(config.memory_format), converted);
  }
  torch::manual_seed(static_cast<std::uint64_t>(config.seed) * 1000003ULL + static_cast<std::uint64_t>(rank.rank));
  return model;
}

namespace {

// --keep-best must name one of the task's validation metrics.
void check_keep_best(const TrainingConfig& config, const Task& task) {
  if (config.keep_best.empty()) return;
  std::string names;
  for (const auto& metric : task.metrics(std::vector<double>(static_cast<std::size_t>(task.num_sums()), 1.0))) {
    if (metric.name == config.keep_best) return;
    names += (names.empty() ? "" : ", ") + metric.name;
  }
  throw UsageError(
      fmt::format("--keep-best {}: --task {} reports {}", config.keep_best, choice_name(config.task), names));
}

// Rank 0 scans the shards once; everyone gets the broadcast index. What follows is deterministic
// given the broadcast metadata, so it fails (or not) on every rank alike.
TrainingData open_training_data(const TrainingConfig& config, const RankInfo& rank, Communicator& control,
                                TaskOptions& task) {
  TrainingData data;
  const LabelKind labels = label_kind(config.task);
  data.train_index =
      scan_shards_collective(control, config.train_data, "--train-data", config.x_name, config.y_name, labels);
  if (!config.val_data.empty()) {
    data.val_index =
        scan_shards_collective(control, config.val_data, "--val-data", config.x_name, config.y_name, labels);
    if (data.val_index->sample_shape != data.train_index.sample_shape)
      throw UsageError(fmt::format("--val-data: samples shaped [{}] but the training samples are [{}]",
                                   fmt::join(data.val_index->sample_shape, ", "),
                                   fmt::join(data.train_index.sample_shape, ", ")));
    if (data.val_index->label_shape != data.train_index.label_shape)
      throw UsageError(fmt::format("--val-data: targets shaped [{}] per sample but the training targets are [{}]",
                                   fmt::join(data.val_index->label_shape, ", "),
                                   fmt::join(data.train_index.label_shape, ", ")));
  }
  task = resolve_task_options(task, data.train_index, largest_token_if_needed(config, data.train_index, control));
  check_task_data(task, data.train_index, "--train-data");
  if (data.val_index) check_task_data(task, *data.val_index, "--val-data");
  data.sampler = std::make_unique<DistributedSampler>(sampler_options(config, data.train_index, rank));
  data.steps = plan_steps(config, data.sampler->batches_per_epoch());

  H5ReaderOptions reading = reader_options(config, rank);
  reading.vocab_size = task.vocab_size;
  data.train_reader = std::make_unique<H5Reader>(data.train_index, reading);
  if (data.val_index) data.val_reader = std::make_unique<H5Reader>(*data.val_index, reading);
  data.loading = loader_options(config);
  if (!config.feature_stats.empty())
    data.loading.transforms.feature_stats = load_feature_stats(config.feature_stats, data.train_index.sample_numel());
  return data;
}

// --sync-batchnorm: the layers get the gradient communicator (device tensors: NCCL on GPUs) before
// DDP's first broadcast; a model without BatchNorm trains as it would without the flag.
void bind_sync_batch_norm_layers(Model& model, Communicator& gradients, const TrainingConfig& config) {
  const int layers = bind_sync_batch_norm(model, &gradients);
  if (layers == 0)
    spdlog::warn("--sync-batchnorm: --model {} has no BatchNorm layer; the flag changes nothing", config.model.text());
  else
    spdlog::info("--sync-batchnorm: {} BatchNorm layers normalise over the global batch (world size {}, on {})", layers,
                 gradients.size(), gradients.backend_name());
}

// Reads the checkpoint found before the data (find_resume_point) and restates its position in this
// run's batch shape (with_resumed_batch chose it).
void resume(TrainingRun& run) {
  if (!run.resume_point) return;
  const ResumePoint& point = *run.resume_point;
  run.start = run.checkpointer->resume(run.state_refs(), point.path).position;
  const BatchShape now{run.rank.world_size, run.config.batch_size, run.config.grad_accum_steps};
  std::int64_t repeated = 0;
  run.start.global_batches_done = micro_batches_done_in(point.written, now, &repeated);
  if (order_dealt_by_world_size(run.config) != nullptr && point.written.world_size != run.rank.world_size) {
    run.start.global_batches_done = 0;  // a new deal of files or chunks (with_resumed_batch warned)
  } else if (repeated > 0 && run.rank.is_root()) {
    spdlog::warn("the new global batch of {} restarts epoch {} at its step {}: the last {} samples done are seen again",
                 now.global(), run.start.epoch, run.start.global_batches_done / now.grad_accum_steps, repeated);
  }
  // Never past the epoch's end (its last step is then done; the loop goes on to the next epoch).
  run.start.global_batches_done =
      std::min(run.start.global_batches_done, run.data.steps.steps_per_epoch * run.config.grad_accum_steps);
  // The resume goes ahead: a later checkpoint in the directory belongs to an abandoned future.
  CheckpointManager::set_aside_newer(run.control, run.config.checkpoint_dir, run.start.step);
  const std::int64_t samples_done = run.start.global_batches_done * now.world_size * now.batch_size;
  spdlog::info(
      "resumed from '{}': step {}, epoch {}, {} samples into the epoch (written by {})", point.path, run.start.step,
      run.start.epoch, samples_done,
      BatchShape{point.written.world_size, point.written.batch_size, point.written.grad_accum_steps}.describe());
}

CheckpointerOptions checkpointer_options(const TrainingConfig& config) {
  CheckpointerOptions options;
  options.directory = config.checkpoint_dir;
  options.keep_last = config.keep_last;
  options.async = config.checkpoint_async;
  options.schedule = checkpoint_schedule_options(config);
  options.config_ini = to_ini(config);
  options.keep_best = config.keep_best;
  options.deadline = config.deadline;
  options.deadline_margin_s = config.deadline_margin;
  options.local = local_level_options(config);
  return options;
}

// The interval log, the progress bar (rank 0), the trace (--trace: collective), TensorBoard (rank
// 0) and the summary, in the order they hear each event (the bar's last line before the table).
void predict_from_plan(const TrainingRun& r, SummaryOutputs& outputs);

void add_observers(TrainingRun& r) {
  const TrainingConfig& c = r.config;
  const bool bar = r.rank.is_root() &&
                   (c.progress == ProgressMode::Bar || (c.progress == ProgressMode::Auto && stdout_is_terminal()));
  TrainingLogOptions log;
  log.metrics_file = r.rank.is_root() ? c.metrics_file : std::string();
  log.total_steps = r.data.steps.total_steps;
  log.samples_per_step = r.samples_per_step();
  log.console = !bar;
  r.log = std::make_unique<TrainingLog>(log, r.start.interval_loss, r.start.interval_steps);
  // One fingerprint method on every rank: the device's as soon as one rank trains on a GPU.
  const bool device_method = allreduce_max(r.control, r.device.device.is_cuda() ? 1 : 0) != 0;
  r.log->add_rider(std::make_unique<ConsistencyCheck>(r.control, c.check_replicas_every, [&r, device_method] {
    return parameter_fingerprint(r.model->parameters(), device_method);
  }));
  StragglerWatch* stragglers = nullptr;
  if (r.rank.world_size > 1) {
    auto watch = std::make_unique<StragglerWatch>(r.control, r.rank.host,
                                                  [&r] { return r.ddp->reducer().last_stats().first_bucket_ready; });
    stragglers = watch.get();
    r.observers.add(*watch);
    r.log->add_rider(std::move(watch));
  }
  r.observers.add(*r.log);
  if (bar) r.observers.add(std::make_unique<ProgressBar>());
  if (!c.trace_dir.empty()) r.observers.add(std::make_unique<TraceObserver>(r.control, c.trace_dir, r.rank.host));
  if (!c.tensorboard_dir.empty()) {
    std::unique_ptr<TensorBoardObserver> tensorboard;
    on_root_then_agree(r.control,
                       [&] { tensorboard = std::make_unique<TensorBoardObserver>(c.tensorboard_dir, r.rank.host); });
    if (tensorboard) r.observers.add(std::move(tensorboard));
  }
  SummaryOutputs outputs;
  outputs.metrics_file = c.metrics_file;
  outputs.checkpoint_dir = c.checkpoint_dir;
  outputs.trace_dir = c.trace_dir;
  outputs.tensorboard_dir = c.tensorboard_dir;
  outputs.best_metric = c.keep_best;
  outputs.mtbf_hours = c.mtbf_hours;
  outputs.local_checkpoint_interval = c.local_checkpoint_interval;
  outputs.checkpoint_interval = c.checkpoint_interval;
  outputs.rank_layout = fmt::format("{} rank{} on {} node{}", r.rank.world_size, r.rank.world_size == 1 ? "" : "s",
                                    r.rank.node_count, r.rank.node_count == 1 ? "" : "s");
  if (!c.plan_file.empty()) predict_from_plan(r, outputs);
  auto summary = std::make_unique<RunSummary>(r.control, outputs, r.rank.host);
  summary->set_straggler_watch(stragglers);
  r.observers.add(std::move(summary));
}

// --plan FILE: mnddp plan's prediction for this run's layout and settings, for the summary to print
// beside what the run measures. A file that does not load is refused at start-up, on every rank.
void predict_from_plan(const TrainingRun& r, SummaryOutputs& outputs) {
  const TrainingConfig& c = r.config;
  PlanInputs plan;
  on_root_then_agree(r.control, [&] { plan = load_plan_inputs(c.plan_file); });
  if (!r.rank.is_root()) return;
  const Topology layout{r.rank.node_count, r.rank.local_size};
  StepOptions options;
  options.buckets = BucketLimits{static_cast<std::size_t>(c.first_bucket_mb * (1 << 20)),
                                 static_cast<std::size_t>(c.bucket_cap_mb * (1 << 20))};
  options.zero_stage = static_cast<int>(c.zero);
  options.gradient_bytes_factor = c.grad_compression == GradCompression::None ? 1.0 : 0.5;
  outputs.predicted_step_s = predict_step(plan.step, plan.network, layout, options).step_s;
  outputs.predicted_memory_bytes = predict_memory(plan.memory, layout.ranks(), options.zero_stage).total();
  outputs.plan_network = plan.network.name;
  if (plan.batch_per_rank != c.batch_size * c.grad_accum_steps)
    spdlog::warn("--plan '{}' measured a batch of {} a rank; this run's is {}: its prediction is for the other batch",
                 c.plan_file, plan.batch_per_rank, c.batch_size * c.grad_accum_steps);
}

// --local-checkpoint-dir: refused now, on every rank, when two node-local checkpoints would not fit on
// some node beside training (ckpt/local_capacity.hpp). The optimizer state is counted whole though
// torch allocates it at the first step.
void check_local_level_fits(TrainingRun& r) {
  const TrainingConfig& c = r.config;
  if (c.local_checkpoint_dir.empty()) return;
  std::uint64_t model_bytes = 0;  // parameters and buffers: every rank, every checkpoint, whole
  std::uint64_t float_elements = 0;
  for (const auto& p : r.model->parameters()) {
    model_bytes += p.nbytes();
    float_elements += static_cast<std::uint64_t>(p.numel());
  }
  for (const auto& b : r.model->buffers()) model_bytes += b.nbytes();
  const int slots = c.optimizer == OptimizerKind::AdamW || c.optimizer == OptimizerKind::Lamb ? 2
                    : c.optimizer == OptimizerKind::Lars || c.momentum != 0.0                 ? 1
                                                                                              : 0;
  // This rank's optimizer state: all of it at --zero 0, its pieces at --zero 1|2 (fp32 either way).
  const double state_bytes = r.zero ? 4.0 * static_cast<double>(r.zero->state_elements(c.optimizer, c.momentum))
                                    : 4.0 * static_cast<double>(slots * float_elements);
  std::vector<double> states(static_cast<std::size_t>(r.rank.world_size));
  std::vector<std::int32_t> nodes(states.size());
  const std::int32_t my_node = r.rank.node_index;
  r.control.allgather(&state_bytes, states.data(), 1, DType::F64);
  r.control.allgather(&my_node, nodes.data(), 1, DType::I32);
  std::optional<Failure> failure;
  if (r.rank.local_rank == 0)
    failure = capture_failure([&] {
      double node_states = 0.0;
      for (std::size_t i = 0; i < states.size(); ++i)
        if (nodes[i] == my_node) node_states += states[i];
      LocalCapacity capacity = measure_local_capacity(c.local_checkpoint_dir);
      // Zero 0: each node one whole file; --zero 1|2: the base, and the node's shares twice (its
      // own and its partner node's copies).
      capacity.checkpoint_bytes =
          static_cast<std::uint64_t>(static_cast<double>(model_bytes) + (r.zero ? 2.0 * node_states : state_bytes));
      const double snapshots =
          c.checkpoint_async ? r.rank.local_size * static_cast<double>(model_bytes) + node_states : 0.0;
      capacity.beside_bytes = static_cast<std::uint64_t>(snapshots + node_states);
      if (const auto refusal = local_capacity_shortfall(capacity, c.local_checkpoint_dir, r.rank.host))
        throw UsageError(*refusal);
    });
  agree_on_failure(r.control, failure);
}

// --zero 0: the optimizer over the whole model. --zero 1|2: over this rank's pieces of it, with the
// state bytes per rank logged (they fall as 1/N).
void make_sharded_or_whole_optimizer(TrainingRun& r) {
  const TrainingConfig& config = r.config;
  if (config.zero == 0) {
    r.optimizer = make_optimizer(config, r.model->named_parameters());
    return;
  }
  r.zero = std::make_unique<ZeroPartition>(static_cast<int>(config.zero), r.ddp->reducer(), *r.gradient_comm);
  r.optimizer = make_optimizer(config, r.zero->parameter_groups(effective_no_decay_norm_bias(config)));
  r.zero->attach(*r.optimizer);
  const auto mib = [](std::int64_t elements) { return static_cast<double>(elements) * 4.0 / (1024.0 * 1024.0); };
  spdlog::info("--zero {}: optimizer state {:.2f} MiB on this rank ({:.2f} MiB for the whole model, over {} ranks){}",
               config.zero, mib(r.zero->state_elements(config.optimizer, config.momentum)),
               mib(r.zero->state_elements_unsharded(config.optimizer, config.momentum)), r.rank.world_size,
               config.zero >= 2 ? "; gradients reduce-scattered" : "");
}

}  // namespace

std::unique_ptr<TrainingRun> set_up_training(const TrainingConfig& given, const RankInfo& rank, MpiComm& control,
                                             GradientCommWrapper wrap) {
  auto run = std::make_unique<TrainingRun>(given, rank, control);
  TrainingRun& r = *run;
  StartupBreakdown& startup = process_startup();
  // The checkpoint comes first: its global batch decides this run's batch shape, which the sampler,
  // the step plan and the loader are built from.
  on_all_then_agree(control, [&] {
    r.resume_point = find_resume_point(given, control);
    if (r.resume_point) r.config = with_resumed_batch(given, *r.resume_point, rank);
  });
  startup.mark("checkpoint verify");
  const TrainingConfig& config = r.config;
  on_all_then_agree(control, [&] { r.device = select_device(config.device, rank); });
  r.backend = select_gradient_backend(config.backend, r.device.cuda_index(), rank, control);
  startup.mark("device");
  on_all_then_agree(control, [&] {
    check_device_rules(config, r.device);
    TaskOptions task = task_options(config);
    r.data = open_training_data(config, rank, control, task);
    startup.mark("shard scan");
    r.task = make_task(task, r.data.train_index);
    check_keep_best(config, *r.task);
    r.data.loading.content = r.task->content();
    r.model = build_model(config, r.data.train_index.sample_shape, *r.task, r.device, rank);
  });
  startup.mark("model build");
  r.gradient_comm = make_gradient_comm(r.backend, control, r.device.cuda_index(), config.collective_timeout);
  if (wrap) r.gradient_comm = wrap(r.gradient_comm);
  if (config.sync_batch_norm) bind_sync_batch_norm_layers(*r.model, *r.gradient_comm, config);
  startup.mark(r.backend == Backend::Nccl ? "NCCL init" : "gradient communicator");
  r.ddp = std::make_unique<DistributedDataParallel>(r.model, control, *r.gradient_comm, ddp_options(config));
  startup.mark("DDP broadcast");
  on_all_then_agree(control, [&] { make_sharded_or_whole_optimizer(r); });
  r.scaler = std::make_unique<LossScaler>(scaler_options(config), r.device.device);
  // The checkpoints record what the data decided (the vocabulary, the context), so `mnddp eval`
  // rebuilds the same model from the validation data alone.
  TrainingConfig recorded = config;
  recorded.vocab_size = r.task->options().vocab_size;
  recorded.context = r.task->options().context;
  // On a GPU the steps' losses and verdicts stay on the device until the host reads them.
  if (r.device.device.is_cuda())
    r.ledger = std::make_unique<StepLedger>(r.device.device, config.on_nonfinite, r.scaler->enabled());
  r.checkpointer = std::make_unique<Checkpointer>(checkpointer_options(recorded), control, r.faults,
                                                  [&r](TrainingPosition& position) {
                                                    r.ddp->sync_buffers();
                                                    settle_ledger(r, position.step);
                                                    position.interval_loss = r.log->interval_loss();
                                                  });
  check_local_level_fits(r);
  settle_preemption_signals(preemption_signals(config));
  startup.mark("optimizer");
  on_all_then_agree(control, [&] { resume(r); });
  startup.mark("checkpoint resume");
  add_observers(r);
  if (r.data.val_reader)
    r.evaluator =
        std::make_unique<Evaluator>(*r.data.val_reader, *r.task, rank, control,
                                    EvaluatorOptions{config.batch_size, config.amp, r.device.device, r.data.loading});
  return run;
}

}  // namespace mnddp
