// Validation metrics, exact across ranks: the task's per-batch sums stay on the device until the
// end, then one all-reduce in float64.
#include "mnddp/train/evaluator.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "mnddp/amp/autocast.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/progress.hpp"
#include "mnddp/train/device_batch.hpp"

namespace mnddp {

Evaluator::Evaluator(H5Reader& reader, const Task& task, const RankInfo& rank, Communicator& control,
                     EvaluatorOptions options)
    : reader_(reader), task_(task), rank_(rank), control_(control), options_(std::move(options)) {}

EvalResult Evaluator::run(Model& model) {
  torch::NoGradGuard no_grad;
  model.eval();
  const auto indices = eval_indices(reader_.index().num_samples(), rank_.world_size, rank_.rank);
  at::Tensor sums = at::zeros({task_.num_sums()}, at::TensorOptions(at::kDouble).device(options_.device));
  LoaderOptions loading = options_.loading;
  loading.content = task_.content();
  Loader loader(reader_, indices, options_.batch_size, loading);
  while (auto batch = loader.next()) {
    const TaskBatch io = task_.split(to_device(*batch, options_.device));
    at::Tensor output;
    {
      AutocastScope autocast(options_.amp, options_.device.type());
      output = model.forward(io.input);
    }
    sums += task_.batch_sums(output, io.target);
    progress::note();
  }
  const at::Tensor host = sums.cpu().contiguous();
  std::vector<double> totals(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
  control_.allreduce(totals.data(), totals.size(), DType::F64, ReduceOp::Sum);
  model.train();
  return EvalResult{task_.metrics(totals), task_.samples(totals), std::string(task_.headline_metric())};
}

}  // namespace mnddp
