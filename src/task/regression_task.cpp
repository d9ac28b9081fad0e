// Regression: MSE or Huber on float targets [N] or [N, k]. Validation reports the loss, MSE and MAE
// over all targets, and R² averaged over targets; with k > 1 also each target's MSE, MAE and R².
// R² = 1 - SSE / SST with SST = Σy² - (Σy)²/n, from sums kept in float64.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>

#include "mnddp/train/device_batch.hpp"
#include "tasks.hpp"

namespace mnddp {
namespace {

namespace F = torch::nn::functional;

class RegressionTask final : public Task {
 public:
  RegressionTask(const TaskOptions& options, std::int64_t targets) : Task(options), targets_(targets) {}

  BatchContent content() const override { return BatchContent::Targets; }
  std::int64_t output_size() const override { return targets_; }
  std::string describe() const override {
    return fmt::format("--task regression with {} target{} per sample", targets_, targets_ == 1 ? "" : "s");
  }
  // Targets [N] become [N, 1], the shape of the model's output.
  TaskBatch split(const DeviceBatch& batch) const override { return {batch.x, batch.y.reshape({-1, targets_})}; }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const override {
    return elementwise_loss(output.to(at::kFloat), target, torch::kMean);
  }

  // [loss sum, samples, then per target: squared error, absolute error, Σy, Σy²]
  std::int64_t num_sums() const override { return 2 + 4 * targets_; }
  at::Tensor batch_sums(const at::Tensor& output, const at::Tensor& target) const override {
    const at::Tensor prediction = output.to(at::kDouble);
    const at::Tensor truth = target.to(at::kDouble);
    const at::Tensor error = prediction - truth;
    const at::Tensor head = at::stack({elementwise_loss(prediction, truth, torch::kSum),
                                       at::scalar_tensor(static_cast<double>(target.size(0)), prediction.options())});
    const at::Tensor per_target =
        at::stack({error.pow(2).sum(0), error.abs().sum(0), truth.sum(0), truth.pow(2).sum(0)}, 1);  // [k, 4]
    return at::cat({head, per_target.flatten()});
  }

  std::vector<Metric> metrics(const std::vector<double>& s) const override {
    const double n = std::max(s[1], 1.0);
    const auto k = static_cast<std::size_t>(targets_);
    double sse = 0.0, sae = 0.0, r2_sum = 0.0;
    std::vector<Metric> each;
    for (std::size_t j = 0; j < k; ++j) {
      const double* t = s.data() + 2 + 4 * j;
      const double sst = t[3] - t[2] * t[2] / n;
      const double r2 = sst > 0.0 ? 1.0 - t[0] / sst : 0.0;  // constant targets: no variance to explain
      sse += t[0];
      sae += t[1];
      r2_sum += r2;
      if (k > 1) {
        each.push_back({fmt::format("mse_{}", j), t[0] / n});
        each.push_back({fmt::format("mae_{}", j), t[1] / n});
        each.push_back({fmt::format("r2_{}", j), r2});
      }
    }
    const double values = n * static_cast<double>(k);
    std::vector<Metric> result = {
        {"loss", s[0] / values}, {"mse", sse / values}, {"mae", sae / values}, {"r2", r2_sum / static_cast<double>(k)}};
    result.insert(result.end(), each.begin(), each.end());
    return result;
  }
  std::int64_t samples(const std::vector<double>& s) const override { return static_cast<std::int64_t>(s[1]); }
  std::string_view headline_metric() const override { return "r2"; }

 private:
  template <typename Reduction>  // torch::kSum or torch::kMean
  at::Tensor elementwise_loss(const at::Tensor& output, const at::Tensor& target, Reduction reduction) const {
    if (options_.loss == RegressionLoss::Huber)
      return F::huber_loss(output, target, F::HuberLossFuncOptions().reduction(reduction).delta(options_.huber_delta));
    return F::mse_loss(output, target, F::MSELossFuncOptions().reduction(reduction));
  }

  std::int64_t targets_;
};

}  // namespace

std::unique_ptr<Task> make_regression_task(const TaskOptions& options, std::int64_t targets_per_sample) {
  return std::make_unique<RegressionTask>(options, targets_per_sample);
}

}  // namespace mnddp
