// Choosing a task, and the checks of the data against it.
#include "mnddp/task/task.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mnddp/error.hpp"
#include "tasks.hpp"

namespace mnddp {

LabelKind label_kind(TaskKind kind) {
  switch (kind) {
    case TaskKind::Classification:
      return LabelKind::Class;
    case TaskKind::Regression:
      return LabelKind::Value;
    case TaskKind::Lm:
      return LabelKind::None;
  }
  throw std::logic_error("label_kind: unknown task");
}

TaskOptions resolve_task_options(TaskOptions options, const ShardIndex& train, std::int64_t largest_token) {
  if (options.kind != TaskKind::Lm) return options;
  if (options.context == 0 && train.sample_shape.size() == 1) options.context = train.sample_shape[0] - 1;
  if (options.vocab_size == 0 && largest_token >= 0) options.vocab_size = largest_token + 1;
  return options;
}

void check_task_data(const TaskOptions& options, const ShardIndex& index, const std::string& option) {
  if (index.shards.empty()) return;
  const std::string& path = index.shards.front().path;
  switch (options.kind) {
    case TaskKind::Classification:
      check_label_range(index, options.num_classes, "--num-classes");
      return;
    case TaskKind::Regression:
      if (index.label_numel() < 1)
        throw UsageError(
            fmt::format("{} '{}': dataset '{}' has targets shaped [samples, 0]; --task regression needs "
                        "at least one target per sample",
                        option, path, index.y_name));
      return;
    case TaskKind::Lm:
      if (is_float_type(index.sample_type))
        throw UsageError(fmt::format("{} '{}': dataset '{}' holds {} values; --task lm needs integer token ids", option,
                                     path, index.x_name, sample_type_name(index.sample_type)));
      if (index.sample_shape.size() != 1)
        throw UsageError(
            fmt::format("{} '{}': dataset '{}' has samples shaped [{}]; --task lm needs token sequences "
                        "shaped [samples, tokens]",
                        option, path, index.x_name, fmt::join(index.sample_shape, ", ")));
      if (index.sample_shape[0] < options.context + 1 || index.sample_shape[0] < 2)
        throw UsageError(
            fmt::format("--context {}: '{}' holds sequences of {} tokens, and predicting {} next tokens "
                        "needs {}",
                        options.context, path, index.sample_shape[0], options.context,
                        std::max<std::int64_t>(options.context + 1, 2)));
      return;
  }
}

std::unique_ptr<Task> make_task(const TaskOptions& options, const ShardIndex& train) {
  switch (options.kind) {
    case TaskKind::Classification:
      return make_classification_task(options);
    case TaskKind::Regression:
      return make_regression_task(options, train.label_numel());
    case TaskKind::Lm:
      return make_language_model_task(options);
  }
  throw std::logic_error("make_task: unknown task");
}

}  // namespace mnddp
