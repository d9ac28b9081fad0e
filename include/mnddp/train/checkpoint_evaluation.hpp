// `mnddp eval`: a checkpoint's model evaluated on validation shards, on any number of ranks (not
// necessarily the training run's). The model is rebuilt from the config stored in the checkpoint
// (with the command line's overrides, e.g. --val-data or --batch-size), its parameters and buffers
// are read from the file (checksums verified), and the task's metrics come out exactly as training
// computes them (sums over samples, all-reduced), whatever the number of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/task/metric.hpp"

namespace mnddp {

struct CheckpointEvaluation {
  std::vector<Metric> metrics;  // the task's, "loss" first
  std::string headline;         // the task's headline metric ("accuracy", "r2", "perplexity")
  std::int64_t samples = 0;
  std::int64_t step = 0;  // the checkpoint's step
  std::string device;     // e.g. "cpu" or "cuda:0 (NVIDIA H200)"
};

// Collective over `control`: the checkpoint's config text (rank 0 reads it, everyone gets it).
// Throws UsageError naming --checkpoint for a file that is not an mnddp checkpoint.
std::string read_checkpoint_config(const std::string& checkpoint, MpiComm& control);

// Collective over `control`. `config` is the checkpoint's config with the command line's
// overrides. Throws UsageError (agreed) for no --val-data, data that does not fit the model, or
// arrays that do not fit the model the config builds.
CheckpointEvaluation evaluate_checkpoint(const TrainingConfig& config, const std::string& checkpoint,
                                         const RankInfo& rank, MpiComm& control);

}  // namespace mnddp
