// Task: what the model's output means. It picks a batch's model input and target, computes the
// training loss, and turns validation outputs into the task's metrics: sums over samples, added
// across batches and ranks, so every metric is exact whatever the number of ranks.
//   classification: cross-entropy (optional label smoothing); loss, accuracy, top5_accuracy
//   regression:     MSE or Huber on float targets [N] or [N, k]; loss, mse, mae, r2 (per target too)
//   lm:             next-token cross-entropy on token ids [N, T]; loss, perplexity, token_accuracy
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/task/metric.hpp"

namespace mnddp {

struct DeviceBatch;

struct TaskOptions {
  TaskKind kind = TaskKind::Classification;
  int num_classes = 10;          // classification
  double label_smoothing = 0.0;  // classification, as torch's cross_entropy(label_smoothing=)
  RegressionLoss loss = RegressionLoss::Mse;
  double huber_delta = 1.0;     // regression with --loss huber
  std::int64_t vocab_size = 0;  // lm; 0: the largest token id in the training data + 1
  std::int64_t context = 0;     // lm: tokens per input; 0: the stored sequence length - 1
};

// A batch split into what the model reads and what its output is scored against.
struct TaskBatch {
  at::Tensor input;
  at::Tensor target;
};

class Task {
 public:
  virtual ~Task() = default;
  TaskKind kind() const { return options_.kind; }
  const TaskOptions& options() const { return options_; }
  // What the loader reads for this task.
  virtual BatchContent content() const = 0;
  // The model's output width: classes, targets per sample, or the vocabulary.
  virtual std::int64_t output_size() const = 0;
  // One sample's model input shape, from the data's sample shape (lm: [context]).
  virtual std::vector<std::int64_t> input_shape(const std::vector<std::int64_t>& sample_shape) const {
    return sample_shape;
  }
  // One sample's model output shape: [output_size()] (lm: [context, vocab]).
  virtual std::vector<std::int64_t> output_shape() const { return {output_size()}; }
  // The task in words, for errors about a model's output ("--task lm with vocabulary 256").
  virtual std::string describe() const = 0;
  virtual TaskBatch split(const DeviceBatch& batch) const = 0;
  // The micro-batch's mean loss (float32 scalar) of `output` (any float dtype) against `target`.
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const = 0;

  // Validation: the sums a batch adds (a float64 tensor of num_sums() values, on output's device),
  // and the metrics of the sums over the whole set; the first metric is always "loss".
  virtual std::int64_t num_sums() const = 0;
  virtual at::Tensor batch_sums(const at::Tensor& output, const at::Tensor& target) const = 0;
  virtual std::vector<Metric> metrics(const std::vector<double>& sums) const = 0;
  // Samples counted in `sums` (the denominator of per-sample metrics).
  virtual std::int64_t samples(const std::vector<double>& sums) const = 0;
  // The metric a run ends by printing ("final validation accuracy: ...").
  virtual std::string_view headline_metric() const = 0;

 protected:
  explicit Task(TaskOptions options) : options_(options) {}
  TaskOptions options_;
};

// Checks `index` (the training or validation data, named by `option`) against the task: class
// labels in range, numeric targets of the same width, integer token sequences within the
// vocabulary and long enough for the context. Throws UsageError naming the file, the dataset and the
// option. `options` must be resolved (resolve_task_options).
void check_task_data(const TaskOptions& options, const ShardIndex& index, const std::string& option);

// The options with what the data decides filled in: the context (lm, from the sequence length),
// and the vocabulary when `largest_token` (the largest id in the training data) is given.
TaskOptions resolve_task_options(TaskOptions options, const ShardIndex& train, std::int64_t largest_token);

// The label kind the task's data holds (what scan_shards checks y against).
LabelKind label_kind(TaskKind kind);

std::unique_ptr<Task> make_task(const TaskOptions& options, const ShardIndex& train);

}  // namespace mnddp
