// Trainer: the training loop. Composes data (shards, sampler, loader), the model, DDP and metrics;
// none of them knows about the Trainer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

struct TrainResult {
  std::int64_t steps = 0;        // optimizer steps taken
  std::int64_t epochs = 0;       // epochs started
  double last_train_loss = 0.0;  // mean over ranks of the last logged interval
  bool evaluated = false;
  double val_accuracy = 0.0;  // exact: summed counts over all ranks
  double val_loss = 0.0;
  std::int64_t val_samples = 0;
  bool preempted = false;      // stopped early on a preemption signal, after a checkpoint
  bool stopped_early = false;  // stopped by --steps-per-run, after a checkpoint
};

class Trainer {
 public:
  Trainer(const TrainingConfig& config, const RankInfo& rank, MpiComm& comm);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainResult run();

  // The model after (or before) training, for tests that compare replicas.
  std::vector<at::Tensor> parameters() const;
  std::string device_description() const;  // e.g. "cpu" or "cuda:0 of 4 visible (...)"
  std::string backend() const;             // what carries gradients: "mpi" or "nccl"

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mnddp
