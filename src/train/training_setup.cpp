// Building a training run: device and backend, data, model, DDP, optimizer, checkpointer, resume.
// Each step's failure is agreed across ranks, so bad input ends every rank with one message.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "mnddp/comm/backend.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/error.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/train/optim.hpp"
#include "training_run.hpp"

namespace mnddp {
namespace {

// Rank 0 scans the shards once; everyone gets the broadcast index. What follows is deterministic
// given the broadcast metadata, so it fails (or not) on every rank alike.
TrainingData open_training_data(const TrainingConfig& config, const RankInfo& rank, Communicator& control) {
  TrainingData data;
  data.train_index = scan_shards_collective(control, config.train_data, "--train-data", config.x_name, config.y_name);
  if (!config.val_data.empty()) {
    data.val_index = scan_shards_collective(control, config.val_data, "--val-data", config.x_name, config.y_name);
    if (data.val_index->sample_shape != data.train_index.sample_shape)
      throw UsageError(fmt::format("--val-data: samples shaped [{}] but the training samples are [{}]",
                                   fmt::join(data.val_index->sample_shape, ", "),
                                   fmt::join(data.train_index.sample_shape, ", ")));
  }
  check_label_range(data.train_index, config.num_classes, "--num-classes");
  if (data.val_index) check_label_range(*data.val_index, config.num_classes, "--num-classes");
  data.sampler = std::make_unique<DistributedSampler>(sampler_options(config, data.train_index, rank));
  data.steps = plan_steps(config, data.sampler->batches_per_epoch());

  const H5ReaderOptions reading = reader_options(config);
  data.train_reader = std::make_unique<H5Reader>(data.train_index, reading);
  if (data.val_index) data.val_reader = std::make_unique<H5Reader>(*data.val_index, reading);
  data.loading = loader_options(config);
  if (!config.feature_stats.empty())
    data.loading.transforms.feature_stats = load_feature_stats(config.feature_stats, data.train_index.sample_numel());
  return data;
}

// Same seed everywhere for initialisation (then rank 0's weights are broadcast anyway); a per-rank
// stream afterwards so dropout masks differ between ranks, as their data does.
std::shared_ptr<Classifier> build_model(const TrainingConfig& config, const TrainingData& data,
                                        const DeviceChoice& device, const RankInfo& rank) {
  torch::manual_seed(static_cast<std::uint64_t>(config.seed));
  auto model = make_model(model_spec(config, data.train_index.sample_shape));
  model->to(device.device);
  torch::manual_seed(static_cast<std::uint64_t>(config.seed) * 1000003ULL + static_cast<std::uint64_t>(rank.rank));
  return model;
}

void resume(TrainingRun& run) {
  auto resumed = run.checkpointer->resume(run.state_refs());
  if (!resumed) return;
  run.start = resumed->position;
  check_resume_fits(run.config, run.start, run.rank, resumed->path);
  spdlog::info("resumed from '{}': step {}, epoch {}, {} global batches into the epoch (written by {} ranks)",
               resumed->path, run.start.step, run.start.epoch, run.start.global_batches_done, run.start.world_size);
}

CheckpointerOptions checkpointer_options(const TrainingConfig& config) {
  CheckpointerOptions options;
  options.directory = config.checkpoint_dir;
  options.keep_last = config.keep_last;
  options.async = config.checkpoint_async;
  options.schedule = checkpoint_schedule_options(config);
  options.resume = config.resume;
  options.config_ini = to_ini(config);
  return options;
}

}  // namespace

std::unique_ptr<TrainingRun> set_up_training(const TrainingConfig& config, const RankInfo& rank, MpiComm& control,
                                             GradientCommWrapper wrap) {
  auto run = std::make_unique<TrainingRun>(config, rank, control);
  TrainingRun& r = *run;
  on_all_then_agree(control, [&] { r.device = select_device(config.device, rank); });
  r.backend = select_gradient_backend(config.backend, r.device.cuda_index(), r.device.visible_gpus, rank, control);
  on_all_then_agree(control, [&] {
    check_device_rules(config, r.device);
    r.data = open_training_data(config, rank, control);
    r.model = build_model(config, r.data, r.device, rank);
  });
  r.gradient_comm = make_gradient_comm(r.backend, control, r.device.cuda_index(), config.collective_timeout);
  if (wrap) r.gradient_comm = wrap(r.gradient_comm);
  r.ddp = std::make_unique<DistributedDataParallel>(r.model, control, *r.gradient_comm, ddp_options(config));
  on_all_then_agree(control, [&] { r.optimizer = make_optimizer(config, r.model->parameters()); });
  r.scaler = std::make_unique<LossScaler>(scaler_options(config), r.device.device);
  r.checkpointer =
      std::make_unique<Checkpointer>(checkpointer_options(config), control, r.faults, [&r] { r.ddp->sync_buffers(); });
  settle_preemption_signals(preemption_signals(config));
  on_all_then_agree(control, [&] { resume(r); });
  r.log = std::make_unique<TrainingLog>(rank.is_root() ? config.metrics_file : std::string(), r.start.interval_loss,
                                        r.start.interval_steps);
  if (r.data.val_reader)
    r.evaluator =
        std::make_unique<Evaluator>(*r.data.val_reader, rank, control,
                                    EvaluatorOptions{config.batch_size, config.amp, r.device.device, r.data.loading});
  return run;
}

}  // namespace mnddp
