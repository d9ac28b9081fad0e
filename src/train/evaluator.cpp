// Validation accuracy and loss, exact across ranks.
#include "mnddp/train/evaluator.hpp"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "mnddp/amp/autocast.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/train/device_batch.hpp"

namespace mnddp {

Evaluator::Evaluator(H5Reader& reader, const RankInfo& rank, Communicator& control, EvaluatorOptions options)
    : reader_(reader), rank_(rank), control_(control), options_(std::move(options)) {}

EvalResult Evaluator::run(Classifier& model) {
  namespace F = torch::nn::functional;
  torch::NoGradGuard no_grad;
  model.eval();
  const auto indices = eval_indices(reader_.index().num_samples(), rank_.world_size, rank_.rank);
  // Sums over this rank's share; every sample of the validation set is counted exactly once.
  double totals[3] = {0.0, 0.0, 0.0};  // correct, loss sum, samples
  Loader loader(reader_, indices, options_.batch_size, options_.loading);
  while (auto batch = loader.next()) {
    const DeviceBatch on_device = to_device(*batch, options_.device);
    at::Tensor logits;
    {
      AutocastScope autocast(options_.amp, options_.device.type());
      logits = model.forward(on_device.x);
    }
    logits = logits.to(at::kFloat);
    totals[0] += logits.argmax(1).eq(on_device.y).sum().item<double>();
    totals[1] +=
        F::cross_entropy(logits, on_device.y, F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    totals[2] += static_cast<double>(batch->size);
  }
  control_.allreduce(totals, 3, DType::F64, ReduceOp::Sum);
  model.train();
  EvalResult result;
  result.samples = static_cast<std::int64_t>(totals[2]);
  result.accuracy = totals[2] > 0 ? totals[0] / totals[2] : 0.0;
  result.loss = totals[2] > 0 ? totals[1] / totals[2] : 0.0;
  return result;
}

}  // namespace mnddp
