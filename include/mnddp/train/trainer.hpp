// Trainer: the training loop, in layers: run() → train_epoch() → train_step() → forward_backward().
// It composes data, model, DDP, checkpointing and logging (built by training_setup.cpp); none of them
// knows about the Trainer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/task/metric.hpp"

namespace mnddp {

struct TrainResult {
  std::int64_t steps = 0;        // optimizer steps done (resumed ones included)
  std::int64_t total_steps = 0;  // of the whole run (--epochs, --max-steps)
  std::int64_t epochs = 0;       // epochs started
  double last_train_loss = 0.0;  // mean over ranks of the last logged interval
  bool evaluated = false;
  std::vector<Metric> val_metrics;  // the task's, exact: sums over all ranks; "loss" first
  std::string val_headline;         // the task's main metric: accuracy, r2 or perplexity
  std::int64_t val_samples = 0;
  bool preempted = false;         // stopped early on a preemption signal, after a checkpoint
  bool stopped_early = false;     // stopped by --steps-per-run, after a checkpoint
  bool already_complete = false;  // resumed at (or past) the last step: nothing to do
  double peak_gpu_mib = 0.0;      // torch's caching allocator's peak on the rank's GPU (0 on the CPU)
};

struct TrainingRun;
class Reducer;
class RunObserver;
struct DeviceBatch;
struct CheckpointDecision;
struct TrainingPosition;
class Loader;
class BatchSource;

// For tests: wraps the gradient communicator a run builds (tests/mpi/test_control_plane.cpp records
// what reaches it).
using GradientCommWrapper = std::function<std::shared_ptr<Communicator>(std::shared_ptr<Communicator>)>;

class Trainer {
 public:
  // Collective over `control` (the MPI communicator of the run): builds everything and resumes.
  Trainer(const TrainingConfig& config, const RankInfo& rank, MpiComm& control, GradientCommWrapper wrap = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainResult run();

  // The model after (or before) training, for tests that compare replicas.
  std::vector<at::Tensor> parameters() const;
  std::vector<at::Tensor> buffers() const;  // BatchNorm statistics, in registration order
  std::string device_description() const;   // e.g. "cpu" or "cuda:0 of 4 visible (...)"
  std::string backend() const;              // what carries gradients: "mpi" or "nccl"

  // mnddp plan's view of the run (src/train/trainer_probe.cpp): it hears the loop, logs the
  // reducer's gradient-ready times, and weighs and times the state.
  void add_observer(RunObserver& observer);
  Reducer& reducer();
  struct StateSizes {
    double parameters = 0;       // the model's parameters and buffers, bytes
    double gradients = 0;        // the gradients as the reducer groups them
    double optimizer_state = 0;  // the optimizer's state (the snapshot less the model)
    double snapshot_s = 0;       // a copied snapshot of the whole state: what an async checkpoint blocks
  };
  StateSizes measure_state();

 private:
  // How an epoch ended: `stop` when this invocation ends after it (checkpointed).
  struct EpochEnd {
    bool stop = false;
    bool preempted = false;
  };
  EpochEnd train_epoch(std::int64_t epoch, std::int64_t& step, TrainResult& result);
  // Optimizer step `step` (from 1) at learning rate `lr`: grad_accum_steps micro-batches, then the
  // update; the step's loss (this rank's, the mean over its micro-batches) goes to the log (on a GPU
  // through the ledger, read at the log interval).
  void train_step(BatchSource& batches, std::int64_t step, double lr);
  // One micro-batch's forward and backward; its loss (unscaled, this rank's, detached, on the device).
  at::Tensor forward_backward(const DeviceBatch& batch, std::int64_t step, bool synchronise);
  void apply_gradients(std::int64_t step, double step_loss);
  void apply_sharded_gradients(std::int64_t step, double step_loss);
  void evaluate(std::int64_t step, std::int64_t epoch, TrainResult& result);
  // after_step of the checkpointer (collective), timed for the observers.
  CheckpointDecision checkpoint_after_step(const TrainingPosition& position);
  // Every rank, once, however the run ends: the observers' run_finished (the summary is collective).
  void finish(const TrainResult& result);
  void log_resources(std::int64_t step);

  std::unique_ptr<TrainingRun> run_;
  // Where the last epoch trained ended: the final checkpoint's position (train_epoch sets it).
  std::int64_t end_epoch_ = 0;
  std::int64_t end_micro_batches_ = 0;
};

}  // namespace mnddp
