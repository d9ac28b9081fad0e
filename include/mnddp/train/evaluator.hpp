// Validation: every sample of the validation set counted exactly once across ranks (contiguous
// per-rank ranges, no padded duplicates); the task's sums are added over the control communicator,
// so its metrics do not depend on the number of ranks.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/task/task.hpp"

namespace mnddp {

struct EvalResult {
  std::vector<Metric> metrics;  // the task's, in its order; the first is "loss"
  std::int64_t samples = 0;
  std::string headline;  // the task's main metric ("accuracy", "r2", "perplexity")

  double loss() const { return metrics.empty() ? 0.0 : metrics.front().value; }
  double value(std::string_view name) const { return metric_value(metrics, name); }
};

struct EvaluatorOptions {
  std::int64_t batch_size = 64;
  Amp amp = Amp::Off;  // the forward pass runs under the same autocast as training's
  c10::Device device{c10::kCPU};
  LoaderOptions loading;
};

class Evaluator {
 public:
  Evaluator(H5Reader& reader, const Task& task, const RankInfo& rank, Communicator& control, EvaluatorOptions options);
  // Collective over the control communicator. Runs `model` in eval mode (and puts it back in train
  // mode): the caller makes the replicas agree first (DDP::sync_buffers).
  EvalResult run(Model& model);

 private:
  H5Reader& reader_;
  const Task& task_;
  RankInfo rank_;
  Communicator& control_;
  EvaluatorOptions options_;
};

}  // namespace mnddp
