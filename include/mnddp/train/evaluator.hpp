// Validation: every sample of the validation set counted exactly once across ranks (contiguous
// per-rank ranges, no padded duplicates), summed over the control communicator.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

struct EvalResult {
  double accuracy = 0.0;
  double loss = 0.0;  // mean cross-entropy
  std::int64_t samples = 0;
};

struct EvaluatorOptions {
  std::int64_t batch_size = 64;
  Amp amp = Amp::Off;  // the forward pass runs under the same autocast as training's
  c10::Device device{c10::kCPU};
  LoaderOptions loading;
};

class Evaluator {
 public:
  Evaluator(H5Reader& reader, const RankInfo& rank, Communicator& control, EvaluatorOptions options);
  // Collective over the control communicator. Runs `model` in eval mode (and puts it back in train
  // mode): the caller makes the replicas agree first (DDP::sync_buffers).
  EvalResult run(Classifier& model);

 private:
  H5Reader& reader_;
  RankInfo rank_;
  Communicator& control_;
  EvaluatorOptions options_;
};

}  // namespace mnddp
