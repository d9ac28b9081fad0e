// Language modelling: next-token cross-entropy on token ids [N, T]. The input is the first
// `context` tokens, the target the same span shifted by one; validation reports the mean token
// loss, its perplexity and the share of tokens predicted exactly.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <cmath>

#include "mnddp/train/device_batch.hpp"
#include "tasks.hpp"

namespace mnddp {
namespace {

namespace F = torch::nn::functional;

class LanguageModelTask final : public Task {
 public:
  explicit LanguageModelTask(const TaskOptions& options) : Task(options) {}

  BatchContent content() const override { return BatchContent::Tokens; }
  std::int64_t output_size() const override { return options_.vocab_size; }
  std::vector<std::int64_t> input_shape(const std::vector<std::int64_t>&) const override { return {options_.context}; }
  std::vector<std::int64_t> output_shape() const override { return {options_.context, options_.vocab_size}; }
  std::string describe() const override {
    return fmt::format("--task lm with a vocabulary of {} and a context of {}", options_.vocab_size, options_.context);
  }
  TaskBatch split(const DeviceBatch& batch) const override {
    return {batch.x.narrow(1, 0, options_.context), batch.x.narrow(1, 1, options_.context)};
  }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const override {
    return F::cross_entropy(output.to(at::kFloat).reshape({-1, output.size(-1)}), target.reshape(-1));
  }

  // [token loss sum, tokens predicted exactly, tokens, sequences]
  std::int64_t num_sums() const override { return 4; }
  at::Tensor batch_sums(const at::Tensor& output, const at::Tensor& target) const override {
    const at::Tensor logits = output.to(at::kFloat).reshape({-1, output.size(-1)});
    const at::Tensor flat = target.reshape(-1);
    const at::Tensor loss_sum = F::cross_entropy(logits, flat, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    const at::Tensor hits = logits.argmax(1).eq(flat).sum();
    return at::stack({loss_sum.to(at::kDouble), hits.to(at::kDouble),
                      at::scalar_tensor(static_cast<double>(flat.numel()), logits.options().dtype(at::kDouble)),
                      at::scalar_tensor(static_cast<double>(target.size(0)), logits.options().dtype(at::kDouble))});
  }

  std::vector<Metric> metrics(const std::vector<double>& s) const override {
    const double tokens = std::max(s[2], 1.0);
    const double loss = s[0] / tokens;
    return {{"loss", loss}, {"perplexity", std::exp(loss)}, {"token_accuracy", s[1] / tokens}};
  }
  std::int64_t samples(const std::vector<double>& s) const override { return static_cast<std::int64_t>(s[3]); }
  std::string_view headline_metric() const override { return "perplexity"; }
};

}  // namespace

std::unique_ptr<Task> make_language_model_task(const TaskOptions& options) {
  return std::make_unique<LanguageModelTask>(options);
}

}  // namespace mnddp
