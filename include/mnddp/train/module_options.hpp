// TrainingConfig -> each module's own options: the one place where the config meets the modules, so
// that data, model, DDP, checkpoint and AMP never see the config (and a new option is wired here,
// next to its neighbours). Pure functions: no I/O, no MPI. (Rules between options are checked when
// the config is parsed: validate() in config.cpp; rules between an option and the device, here.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/amp/loss_scaler.hpp"
#include "mnddp/ckpt/checkpoint_schedule.hpp"
#include "mnddp/ckpt/local_level.hpp"
#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/config.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/task/task.hpp"
#include "mnddp/train/device.hpp"

namespace mnddp {

// Rules between options and the device (fp16 needs CUDA). Throws UsageError naming the option.
void check_device_rules(const TrainingConfig& config, const DeviceChoice& device);

SamplerOptions sampler_options(const TrainingConfig& config, const ShardIndex& train, const RankInfo& rank);
// --loader-threads 0 resolves here to the cores `rank` has left after torch's threads; the config
// keeps the 0, so a checkpoint's config means "auto" on the machine that resumes or evaluates it.
H5ReaderOptions reader_options(const TrainingConfig& config, const RankInfo& rank);
// The transforms but the feature statistics, which come from a file (training_setup.cpp reads it).
LoaderOptions loader_options(const TrainingConfig& config);
TaskOptions task_options(const TrainingConfig& config);  // before the data resolves what it decides
// `input_shape`: one sample as the model reads it (Task::input_shape); `outputs`: Task::output_size.
ModelSpec model_spec(const TrainingConfig& config, const std::vector<std::int64_t>& input_shape, std::int64_t outputs);
DdpOptions ddp_options(const TrainingConfig& config);
LossScalerOptions scaler_options(const TrainingConfig& config);
CheckpointScheduleOptions checkpoint_schedule_options(const TrainingConfig& config);
// --local-checkpoint-dir's level: its directory, the run it belongs to, and whether it holds shares.
LocalLevelOptions local_level_options(const TrainingConfig& config);
// The signals this run checkpoints on: none without --checkpoint-dir (a signal then has its usual effect).
std::vector<int> preemption_signals(const TrainingConfig& config);

// How many optimizer steps an epoch and the run have.
struct StepPlan {
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;
};
// Throws UsageError when an epoch has fewer micro-batches than one accumulation needs.
StepPlan plan_steps(const TrainingConfig& config, std::int64_t batches_per_epoch);

}  // namespace mnddp
