// `mnddp eval`: rebuild the checkpoint's model from its config, read its tensors, validate.
#include "mnddp/train/checkpoint_evaluation.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "mnddp/ckpt/array_tensor.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/error.hpp"
#include "training_run.hpp"

namespace mnddp {
namespace {

// Copies the checkpoint's `group/name` arrays into the module's tensors of the same names; every
// tensor must be there with its shape and dtype.
void load_tensors(const CheckpointReader& reader, const std::string& group,
                  const torch::OrderedDict<std::string, at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  for (const auto& item : tensors) {
    const std::string path = group + "/" + item.key();
    if (!reader.has_array(path))
      throw UsageError(
          fmt::format("--checkpoint '{}': no array '{}', which the model its config builds has", reader.path(), path));
    const at::Tensor host = to_tensor(reader.read(path));
    at::Tensor target = item.value();  // a handle: copy_ writes the module's tensor
    if (host.sizes() != target.sizes() || host.scalar_type() != target.scalar_type())
      throw UsageError(
          fmt::format("--checkpoint '{}': array '{}' is {} [{}], but the model its config builds has {} [{}]",
                      reader.path(), path, c10::toString(host.scalar_type()), fmt::join(host.sizes(), ", "),
                      c10::toString(target.scalar_type()), fmt::join(target.sizes(), ", ")));
    target.copy_(host);
  }
}

}  // namespace

std::string read_checkpoint_config(const std::string& checkpoint, MpiComm& control) {
  std::string ini;
  on_root_then_agree(control, [&] {
    std::error_code error;
    if (!std::filesystem::is_regular_file(checkpoint, error))
      throw UsageError(fmt::format("--checkpoint '{}': no such file", checkpoint));
    const CheckpointReader reader(checkpoint);
    if (!reader.has_attribute("config"))
      throw UsageError(fmt::format("--checkpoint '{}': no 'config' attribute: not an mnddp checkpoint", checkpoint));
    ini = reader.attribute("config");
  });
  broadcast_string(control, ini, 0);
  return ini;
}

CheckpointEvaluation evaluate_checkpoint(const TrainingConfig& config, const std::string& checkpoint,
                                         const RankInfo& rank, MpiComm& control) {
  CheckpointEvaluation result;
  DeviceChoice device;
  std::unique_ptr<Task> task;
  std::optional<ShardIndex> index;
  std::shared_ptr<Model> model;
  on_all_then_agree(control, [&] {
    device = select_device(config.device, rank);
    check_device_rules(config, device);
    result.device = device.description;
  });
  on_all_then_agree(control, [&] {
    if (config.val_data.empty())
      throw UsageError(fmt::format("mnddp eval: --val-data: none given, and the run of '{}' had none", checkpoint));
  });
  index = scan_shards_collective(control, config.val_data, "--val-data", config.x_name, config.y_name,
                                 label_kind(config.task));
  const std::int64_t largest = largest_token_if_needed(config, *index, control);
  on_all_then_agree(control, [&] {
    const CheckpointReader reader(checkpoint);
    const std::string stored_shape = reader.attribute("sample_shape");
    if (stored_shape != fmt::format("{}", fmt::join(index->sample_shape, ",")))
      throw UsageError(fmt::format("--val-data: samples shaped [{}], but '{}' was trained on [{}]",
                                   fmt::join(index->sample_shape, ", "), checkpoint, stored_shape));
    result.step = std::stoll(reader.attribute("step"));
    if (largest >= 0)
      spdlog::warn(
          "the checkpoint's config has --vocab-size 0 (written before mnddp recorded the vocabulary): "
          "taking {} from the validation data",
          largest + 1);
    const TaskOptions options = resolve_task_options(task_options(config), *index, largest);
    check_task_data(options, *index, "--val-data");
    task = make_task(options, *index);
    model = build_model(config, index->sample_shape, *task, device, rank);
    load_tensors(reader, "model", model->named_parameters());
    load_tensors(reader, "buffers", model->named_buffers());
  });
  H5ReaderOptions reading = reader_options(config, rank);
  reading.vocab_size = task->options().vocab_size;
  H5Reader reader(*index, reading);
  LoaderOptions loading = loader_options(config);
  loading.content = task->content();
  if (!config.feature_stats.empty())
    loading.transforms.feature_stats = load_feature_stats(config.feature_stats, index->sample_numel());
  Evaluator evaluator(reader, *task, rank, control,
                      EvaluatorOptions{config.batch_size, config.amp, device.device, loading});
  const EvalResult eval = evaluator.run(*model);
  result.metrics = eval.metrics;
  result.headline = eval.headline;
  result.samples = eval.samples;
  return result;
}

}  // namespace mnddp
