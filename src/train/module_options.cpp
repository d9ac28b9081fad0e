// The config's translation into module options, and the cross-option rules.
#include "mnddp/train/module_options.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <filesystem>

#include <algorithm>

#include "mnddp/data/chunk_order.hpp"
#include "mnddp/env_info.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

void check_device_rules(const TrainingConfig& config, const DeviceChoice& device) {
  if (config.amp == Amp::FP16 && device.device.is_cpu())
    throw UsageError("--amp fp16: float16 autocast needs a CUDA device; use --amp bf16 on CPU");
}

SamplerOptions sampler_options(const TrainingConfig& config, const ShardIndex& train, const RankInfo& rank) {
  SamplerOptions sampling;
  sampling.num_samples = train.num_samples();
  sampling.world_size = rank.world_size;
  sampling.rank = rank.rank;
  sampling.batch_size = config.batch_size;
  sampling.seed = static_cast<std::uint64_t>(config.seed);
  sampling.shuffle = config.shuffle;
  sampling.drop_last = config.drop_last;
  sampling.micro_batches_per_step = config.grad_accum_steps;
  sampling.mode = config.partition;
  sampling.shard_sizes = train.shard_sizes();
  sampling.shuffle_buffer = config.shuffle_buffer;
  if (config.shuffle_unit == ShuffleUnit::Chunk) {
    if (config.partition == PartitionMode::Shard)
      throw UsageError(
          "--shuffle-unit chunk: --partition shard already reads whole files in order on each rank; use "
          "--shuffle-buffer there, or --partition sample with --shuffle-unit chunk");
    deal_chunks(sampling, train, config.shuffle_window);
  }
  return sampling;
}

H5ReaderOptions reader_options(const TrainingConfig& config, const RankInfo& rank) {
  H5ReaderOptions options{config.nonfinite_inputs, config.batch_size};
  options.decode_threads =
      resolve_loader_threads(config.loader_threads, at::get_num_threads(), rank, environment_from_process());
  if (config.shuffle_unit == ShuffleUnit::Chunk) keep_window_decoded(options, config.shuffle_window);
  return options;
}

LoaderOptions loader_options(const TrainingConfig& config) {
  LoaderOptions loading;
  loading.prefetch_batches = config.prefetch_batches;
  loading.transforms.scale_uint8 = config.scale_uint8;
  return loading;
}

TaskOptions task_options(const TrainingConfig& config) {
  TaskOptions task;
  task.kind = config.task;
  task.num_classes = config.num_classes;
  task.label_smoothing = config.label_smoothing;
  task.loss = config.loss;
  task.huber_delta = config.huber_delta;
  task.vocab_size = config.vocab_size;
  task.context = config.context;
  return task;
}

ModelSpec model_spec(const TrainingConfig& config, const std::vector<std::int64_t>& input_shape, std::int64_t outputs) {
  ModelSpec spec;
  spec.kind = config.model.kind;
  spec.torchscript_path = config.model.path;
  spec.patch_size = config.patch_size;
  spec.input_shape = input_shape;
  spec.num_outputs = outputs;
  spec.hidden = config.hidden;
  spec.layers = config.layers;
  spec.heads = config.heads;
  spec.stem = config.stem;
  spec.tie_embeddings = config.tie_embeddings;
  spec.dropout = config.dropout;
  spec.sync_batch_norm = config.sync_batch_norm;
  return spec;
}

DdpOptions ddp_options(const TrainingConfig& config) {
  DdpOptions options;
  options.broadcast_buffers = config.broadcast_buffers;
  options.reducer.limits.cap_bytes = static_cast<std::size_t>(config.bucket_cap_mb * 1024 * 1024);
  options.reducer.limits.first_cap_bytes = static_cast<std::size_t>(config.first_bucket_mb * 1024 * 1024);
  options.reducer.find_unused_parameters = config.find_unused_parameters;
  options.reducer.compression = config.grad_compression;
  options.reducer.loss_prescaled = true;  // backward runs on ddp.scale_loss(loss): no division pass
  options.reducer.shard_gradients = config.zero >= 2;
  // SyncBatchNorm's backward all-reduces share the gradient communicator with the buckets; where
  // ranks may leave different parameters unused, buckets wait for finalize() so that every rank
  // issues its collectives in one order (reducer.hpp, ReducerOptions::overlap).
  options.reducer.overlap = !(config.sync_batch_norm && config.find_unused_parameters);
  return options;
}

LossScalerOptions scaler_options(const TrainingConfig& config) {
  LossScalerOptions scaling;
  scaling.enabled = config.amp == Amp::FP16;
  return scaling;
}

CheckpointScheduleOptions checkpoint_schedule_options(const TrainingConfig& config) {
  CheckpointScheduleOptions schedule;
  schedule.enabled = !config.checkpoint_dir.empty();
  schedule.interval = config.checkpoint_interval;
  schedule.minutes = config.checkpoint_minutes;
  schedule.steps_per_run = config.steps_per_run;
  schedule.local_interval = config.local_checkpoint_interval;
  return schedule;
}

LocalLevelOptions local_level_options(const TrainingConfig& config) {
  LocalLevelOptions options;
  if (config.local_checkpoint_dir.empty()) return options;
  options.directory = config.local_checkpoint_dir;
  // The run a node-local directory belongs to: its --checkpoint-dir, absolute (every rank starts in
  // the job's directory, so every node spells it alike).
  options.run = std::filesystem::absolute(config.checkpoint_dir).lexically_normal().string();
  options.sharded = config.zero > 0;
  return options;
}

std::vector<int> preemption_signals(const TrainingConfig& config) {
  if (config.checkpoint_dir.empty()) return {};
  return config.preempt_signals;
}

StepPlan plan_steps(const TrainingConfig& config, std::int64_t batches_per_epoch) {
  StepPlan plan;
  plan.steps_per_epoch = batches_per_epoch / config.grad_accum_steps;
  if (plan.steps_per_epoch < 1)
    throw UsageError(fmt::format("--grad-accum-steps {}: an epoch has only {} micro-batches per rank",
                                 config.grad_accum_steps, batches_per_epoch));
  plan.total_steps = plan.steps_per_epoch * config.epochs;
  if (config.max_steps > 0) plan.total_steps = std::min(plan.total_steps, config.max_steps);
  return plan;
}

}  // namespace mnddp
