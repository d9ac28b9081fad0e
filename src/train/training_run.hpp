// Internal to train/: everything one training run holds, built by set_up_training() in the order
// the parts depend on each other (training_setup.cpp) and driven by the loop (trainer.cpp).
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>

#include "mnddp/amp/loss_scaler.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/fault/fault_hooks.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/observe/run_observer.hpp"
#include "mnddp/task/task.hpp"
#include "mnddp/train/checkpointer.hpp"
#include "mnddp/train/device.hpp"
#include "mnddp/train/evaluator.hpp"
#include "mnddp/train/module_options.hpp"
#include "mnddp/train/resume_plan.hpp"
#include "mnddp/train/step_ledger.hpp"
#include "mnddp/train/trainer.hpp"
#include "mnddp/train/training_log.hpp"
#include "mnddp/zero/zero_partition.hpp"

namespace mnddp {

struct TrainingData {
  ShardIndex train_index;
  std::optional<ShardIndex> val_index;
  std::unique_ptr<H5Reader> train_reader;
  std::unique_ptr<H5Reader> val_reader;
  std::unique_ptr<DistributedSampler> sampler;
  LoaderOptions loading;  // transforms shared by training and validation
  StepPlan steps;
};

struct TrainingRun {
  TrainingRun(const TrainingConfig& c, const RankInfo& r, MpiComm& m)
      : config(c), rank(r), control(m), faults(c.inject_fault, r) {}

  TrainingConfig config;  // as given, with the batch shape a resume keeps (train/resume_plan.hpp)
  RankInfo rank;
  MpiComm& control;  // control plane: metrics, validation counts, agreement, checkpoint I/O
  FaultHooks faults;

  DeviceChoice device;
  Backend backend = Backend::Mpi;               // what carries gradients
  std::shared_ptr<Communicator> gradient_comm;  // gradient plane: NCCL, or `control` itself
  TrainingData data;
  std::unique_ptr<Task> task;  // what the model's output means: loss and metrics
  std::shared_ptr<Model> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<ZeroPartition> zero;  // --zero 1|2: this rank's pieces, which `optimizer` steps
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LossScaler> scaler;    // enabled for --amp fp16
  std::unique_ptr<Evaluator> evaluator;  // with --val-data
  std::unique_ptr<Checkpointer> checkpointer;
  std::optional<ResumePoint> resume_point;  // the checkpoint --resume found, before anything was built
  TrainingPosition start;                   // where the loop begins (from --resume)
  std::unique_ptr<TrainingLog> log;
  Observers observers;             // the log, the summary, and --progress, --trace's observers
  std::int64_t skipped_steps = 0;  // steps skipped for inf/NaN gradients
  // On a GPU: the loss and the verdicts the steps keep on the device (step_ledger.hpp); none on the CPU.
  std::unique_ptr<StepLedger> ledger;

  // The global batch of one optimizer step: every rank's micro-batches.
  std::int64_t samples_per_step() const { return config.batch_size * config.grad_accum_steps * rank.world_size; }

  TrainingStateRefs state_refs() {
    return TrainingStateRefs{
        *model, *optimizer, config.optimizer, *scaler, device.device, data.train_index.sample_shape, zero.get()};
  }
};

// The largest token id of the training data, when the vocabulary must be derived from it (lm with
// --vocab-size 0): rank 0 reads every shard and broadcasts (collective over `control`); -1 when not
// needed.
std::int64_t largest_token_if_needed(const TrainingConfig& config, const ShardIndex& train, Communicator& control);

// The model for `task` on samples shaped `sample_shape`, on the device. The same seed on every rank
// for initialisation (rank 0's weights are broadcast anyway); a per-rank stream afterwards, for what
// draws from it (a TorchScript model's own dropout: the built-in models key theirs by sample).
std::shared_ptr<Model> build_model(const TrainingConfig& config, const std::vector<std::int64_t>& sample_shape,
                                   const Task& task, const DeviceChoice& device, const RankInfo& rank);

// Collective over `control`: builds every part; a bad value is one agreed UsageError on every rank.
// `wrap`, when given, wraps the gradient communicator (tests).
std::unique_ptr<TrainingRun> set_up_training(const TrainingConfig& config, const RankInfo& rank, MpiComm& control,
                                             GradientCommWrapper wrap);

}  // namespace mnddp
