// Classification: cross-entropy with optional label smoothing (as torch's); top-1 and top-5
// accuracy counted exactly.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>

#include "mnddp/train/device_batch.hpp"
#include "tasks.hpp"

namespace mnddp {
namespace {

namespace F = torch::nn::functional;

class ClassificationTask final : public Task {
 public:
  explicit ClassificationTask(const TaskOptions& options) : Task(options) {}

  BatchContent content() const override { return BatchContent::ClassLabels; }
  std::int64_t output_size() const override { return options_.num_classes; }
  std::string describe() const override {
    return fmt::format("--task classification with {} classes", options_.num_classes);
  }
  TaskBatch split(const DeviceBatch& batch) const override { return {batch.x, batch.y}; }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const override {
    return F::cross_entropy(output.to(at::kFloat), target,
                            F::CrossEntropyFuncOptions().label_smoothing(options_.label_smoothing));
  }

  // [loss sum, top-1 correct, top-5 correct, samples]
  std::int64_t num_sums() const override { return 4; }
  at::Tensor batch_sums(const at::Tensor& output, const at::Tensor& target) const override {
    const at::Tensor logits = output.to(at::kFloat);
    const at::Tensor loss_sum = F::cross_entropy(
        logits, target, F::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(options_.label_smoothing));
    const std::int64_t k = std::min<std::int64_t>(5, logits.size(1));
    const at::Tensor top = std::get<1>(logits.topk(k, 1));
    const at::Tensor hits = top.eq(target.unsqueeze(1));
    const at::Tensor top1 = hits.select(1, 0).sum();
    const at::Tensor top5 = hits.any(1).sum();
    const at::Tensor count = at::scalar_tensor(static_cast<double>(target.size(0)), logits.options());
    return at::stack({loss_sum, top1.to(at::kFloat), top5.to(at::kFloat), count}).to(at::kDouble);
  }

  std::vector<Metric> metrics(const std::vector<double>& s) const override {
    const double n = std::max(s[3], 1.0);
    return {{"loss", s[0] / n}, {"accuracy", s[1] / n}, {"top5_accuracy", s[2] / n}};
  }
  std::int64_t samples(const std::vector<double>& s) const override { return static_cast<std::int64_t>(s[3]); }
  std::string_view headline_metric() const override { return "accuracy"; }
};

}  // namespace

std::unique_ptr<Task> make_classification_task(const TaskOptions& options) {
  return std::make_unique<ClassificationTask>(options);
}

}  // namespace mnddp
