// Tasks: each task's loss and metrics on inputs whose answers are known by hand, sums that add
// across ranks to the whole set's metrics, and the checks of the data against the task.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

#include <cmath>

#include "mnddp/task/task.hpp"
#include "mnddp/train/device_batch.hpp"
#include "test_support.hpp"

using namespace mnddp;
using testing_support::usage_error_of;

namespace {

// A float32 tensor from a list of numbers (at::tensor cannot mix 6. and 5 in one list).
at::Tensor floats(std::initializer_list<double> values) {
  return at::tensor(std::vector<double>(values)).to(at::kFloat);
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

ShardIndex index_with(std::vector<std::int64_t> sample_shape, SampleType type, std::vector<std::int64_t> label_shape,
                      bool labels = true) {
  ShardIndex index;
  index.shards.push_back({"data.h5", 10, 0, 3});
  index.sample_shape = std::move(sample_shape);
  index.sample_type = type;
  index.label_type = SampleType::F32;
  index.label_shape = std::move(label_shape);
  if (!labels) index.y_name.clear();
  return index;
}

TEST(ClassificationTask, TopOneAndTopFiveCountExactlyAndLabelSmoothingIsTorchs) {
  TaskOptions options;
  options.num_classes = 6;
  options.label_smoothing = 0.1;
  const auto task = make_task(options, ShardIndex{});
  // Sample 0: true class ranked first; sample 1: ranked fifth; sample 2: ranked last (sixth).
  const at::Tensor logits = floats({6, 5, 4, 3, 2, 1, /**/ 6, 5, 4, 3, 2, 1, /**/ 6, 5, 4, 3, 2, 1}).view({3, 6});
  const at::Tensor labels = at::tensor(std::vector<std::int64_t>{0, 4, 5});
  const auto sums = to_vector(task->batch_sums(logits, labels));
  ASSERT_EQ(sums.size(), 4u);
  EXPECT_EQ(sums[1], 1.0);  // top-1
  EXPECT_EQ(sums[2], 2.0);  // top-5
  EXPECT_EQ(sums[3], 3.0);
  // Smoothed cross-entropy by its definition: (1 - eps) * NLL + eps * mean over classes of -log p.
  const at::Tensor log_p = logits.log_softmax(1);
  const double nll = -(log_p[0][0] + log_p[1][4] + log_p[2][5]).item<double>();
  const double uniform = -log_p.mean(1).sum().item<double>();
  EXPECT_NEAR(sums[0], 0.9 * nll + 0.1 * uniform, 1e-5);
  EXPECT_NEAR(task->loss(logits, labels).item<double>(), sums[0] / 3, 1e-6);
  const auto metrics = task->metrics(sums);
  EXPECT_EQ(metrics[0].name, "loss");
  EXPECT_NEAR(metric_value(metrics, "accuracy"), 1.0 / 3, 1e-12);
  EXPECT_NEAR(metric_value(metrics, "top5_accuracy"), 2.0 / 3, 1e-12);
}

TEST(RegressionTask, MetricsPerTargetAndR2FromSumsThatAddAcrossRanks) {
  TaskOptions options;
  options.kind = TaskKind::Regression;
  const auto task = make_task(options, index_with({2}, SampleType::F32, {2}));
  EXPECT_EQ(task->output_size(), 2);
  // Target 0 predicted perfectly; target 1 predicted as its mean (R² = 0).
  const at::Tensor truth = floats({1, 10, 2, 20, 3, 30, 4, 40}).view({4, 2});
  const at::Tensor prediction = floats({1, 25, 2, 25, 3, 25, 4, 25}).view({4, 2});
  // Two "ranks" with half the samples each: their sums add to the whole set's.
  const auto first = to_vector(task->batch_sums(prediction.narrow(0, 0, 2), truth.narrow(0, 0, 2)));
  const auto second = to_vector(task->batch_sums(prediction.narrow(0, 2, 2), truth.narrow(0, 2, 2)));
  std::vector<double> sums(first.size());
  for (std::size_t i = 0; i < sums.size(); ++i) sums[i] = first[i] + second[i];
  EXPECT_EQ(to_vector(task->batch_sums(prediction, truth)), sums);
  const auto metrics = task->metrics(sums);
  EXPECT_NEAR(metric_value(metrics, "r2_0"), 1.0, 1e-12);
  EXPECT_NEAR(metric_value(metrics, "r2_1"), 0.0, 1e-12);
  EXPECT_NEAR(metric_value(metrics, "r2"), 0.5, 1e-12);
  EXPECT_NEAR(metric_value(metrics, "mse_1"), (225. + 25 + 25 + 225) / 4, 1e-9);
  EXPECT_NEAR(metric_value(metrics, "mae_1"), (15. + 5 + 5 + 15) / 4, 1e-9);
  EXPECT_NEAR(metric_value(metrics, "mse"), 500. / 8, 1e-9);
  EXPECT_NEAR(metric_value(metrics, "loss"), 500. / 8, 1e-9);  // MSE loss
  EXPECT_EQ(task->samples(sums), 4);
}

TEST(RegressionTask, HuberAndScalarTargets) {
  TaskOptions options;
  options.kind = TaskKind::Regression;
  options.loss = RegressionLoss::Huber;
  options.huber_delta = 1.0;
  const auto task = make_task(options, index_with({2}, SampleType::F32, {}));
  DeviceBatch batch{at::zeros({2, 2}), floats({0.5, 3.0})};
  const TaskBatch io = task->split(batch);
  EXPECT_EQ(io.target.sizes(), (at::IntArrayRef{2, 1}));
  // |e| = 0.5 -> 0.5 e² = 0.125; |e| = 3 -> delta (|e| - delta / 2) = 2.5.
  EXPECT_NEAR(task->loss(at::zeros({2, 1}), io.target).item<double>(), (0.125 + 2.5) / 2, 1e-6);
}

TEST(LanguageModelTask, PredictsTheNextTokenOverTheContext) {
  TaskOptions options;
  options.kind = TaskKind::Lm;
  const ShardIndex tokens = index_with({9}, SampleType::U16, {}, false);
  options = resolve_task_options(options, tokens, 99);
  EXPECT_EQ(options.context, 8);
  EXPECT_EQ(options.vocab_size, 100);
  options.context = 4;
  const auto task = make_task(options, tokens);
  EXPECT_EQ(task->input_shape({9}), (std::vector<std::int64_t>{4}));
  DeviceBatch batch{at::arange(18, at::kLong).view({2, 9}), {}};
  const TaskBatch io = task->split(batch);
  EXPECT_TRUE(io.input.equal(at::tensor(std::vector<std::int64_t>{0, 1, 2, 3, 9, 10, 11, 12}).view({2, 4})));
  EXPECT_TRUE(io.target.equal(at::tensor(std::vector<std::int64_t>{1, 2, 3, 4, 10, 11, 12, 13}).view({2, 4})));
  // Uniform logits: the loss is log(vocab), the perplexity the vocabulary size.
  const at::Tensor uniform = at::zeros({2, 4, 100});
  const auto metrics = task->metrics(to_vector(task->batch_sums(uniform, io.target)));
  EXPECT_NEAR(metric_value(metrics, "loss"), std::log(100.0), 1e-5);
  EXPECT_NEAR(metric_value(metrics, "perplexity"), 100.0, 1e-3);
  EXPECT_EQ(task->samples(to_vector(task->batch_sums(uniform, io.target))), 2);
}

TEST(TaskChecks, TheDataMustFitTheTask) {
  TaskOptions lm;
  lm.kind = TaskKind::Lm;
  lm.context = 16;
  auto message =
      usage_error_of([&] { check_task_data(lm, index_with({9}, SampleType::U16, {}, false), "--train-data"); });
  EXPECT_NE(message.find("--context 16: 'data.h5' holds sequences of 9 tokens"), std::string::npos) << message;
  message = usage_error_of([&] { check_task_data(lm, index_with({32}, SampleType::F32, {}, false), "--train-data"); });
  EXPECT_NE(message.find("holds float32 values; --task lm needs integer token ids"), std::string::npos) << message;
  message = usage_error_of([&] { check_task_data(lm, index_with({4, 8}, SampleType::I32, {}, false), "--val-data"); });
  EXPECT_NE(message.find("--val-data 'data.h5'"), std::string::npos) << message;
}

}  // namespace
