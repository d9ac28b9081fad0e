// The closed choices of a run (--amp, --partition, --backend, ...): one enum each, with its names in
// one table. The config parses each option once into its enum; the option table takes --help's
// list, the error text and docs/CONFIG.md from the same names, so none of them can drift. Modules
// take the enums and never compare option text. Torch-free, so every layer may include it.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mnddp {

enum class Amp { Off, BF16, FP16 };                        // --amp: autocast precision of the forward pass
enum class PartitionMode { Sample, Shard };                // --partition: how samples are dealt to ranks
enum class ShuffleUnit { Sample, Chunk };                  // --shuffle-unit: what the epoch shuffle permutes
enum class NonfinitePolicy { Error, Warn, Ignore };        // --nonfinite-inputs: NaN/Inf in float inputs
enum class NonfiniteGradients { Abort, Skip };             // --on-nonfinite: NaN/Inf in the gradients
enum class GradCompression { None, BF16, FP16 };           // --grad-compression: all-reduce precision
enum class Backend { Auto, Nccl, Mpi };                    // --backend: what carries the gradients
enum class DeviceRequest { Auto, Cpu, Cuda };              // --device
enum class OptimizerKind { Sgd, AdamW, Lars, Lamb };       // --optimizer
enum class LrSchedule { Constant, Cosine, Step, Linear };  // --lr-schedule
enum class ModelKind {
  Mlp,
  ConvNet,
  Resnet18,
  Resnet34,
  Resnet50,
  Resnet101,
  Resnet152,
  Cnn3d,
  Vit,
  Gpt,
  Torchscript
};                                                           // --model
enum class Stem { Auto, Cifar, Imagenet };                   // --stem: a ResNet's first layers
enum class MemoryLayout { Auto, Contiguous, ChannelsLast };  // --memory-format: of 4-D weights and activations
enum class TaskKind { Classification, Regression, Lm };      // --task
enum class RegressionLoss { Mse, Huber };                    // --loss
enum class LogLevel { Trace, Debug, Info, Warn, Error };     // --log-level
enum class ProgressMode { Auto, Bar, Lines };                // --progress: how rank 0 shows how far it has come

// ChoiceNames<E>::table: every value of E with its option text, in the order --help lists them.
template <typename E>
struct ChoiceNames;

template <typename E>
concept Choice = requires {
  ChoiceNames<E>::table;
};

// One row of a table: a value and its text.
template <typename E>
constexpr std::pair<E, std::string_view> named(E value, std::string_view text) {
  return {value, text};
}

template <>
struct ChoiceNames<Amp> {
  static constexpr std::array table{named(Amp::Off, "off"), named(Amp::BF16, "bf16"), named(Amp::FP16, "fp16")};
};
template <>
struct ChoiceNames<PartitionMode> {
  static constexpr std::array table{named(PartitionMode::Sample, "sample"), named(PartitionMode::Shard, "shard")};
};
template <>
struct ChoiceNames<ShuffleUnit> {
  static constexpr std::array table{named(ShuffleUnit::Sample, "sample"), named(ShuffleUnit::Chunk, "chunk")};
};
template <>
struct ChoiceNames<NonfinitePolicy> {
  static constexpr std::array table{named(NonfinitePolicy::Error, "error"), named(NonfinitePolicy::Warn, "warn"),
                                    named(NonfinitePolicy::Ignore, "ignore")};
};
template <>
struct ChoiceNames<NonfiniteGradients> {
  static constexpr std::array table{named(NonfiniteGradients::Abort, "abort"), named(NonfiniteGradients::Skip, "skip")};
};
template <>
struct ChoiceNames<GradCompression> {
  static constexpr std::array table{named(GradCompression::None, "none"), named(GradCompression::BF16, "bf16"),
                                    named(GradCompression::FP16, "fp16")};
};
template <>
struct ChoiceNames<Backend> {
  static constexpr std::array table{named(Backend::Auto, "auto"), named(Backend::Nccl, "nccl"),
                                    named(Backend::Mpi, "mpi")};
};
template <>
struct ChoiceNames<DeviceRequest> {
  static constexpr std::array table{named(DeviceRequest::Auto, "auto"), named(DeviceRequest::Cpu, "cpu"),
                                    named(DeviceRequest::Cuda, "cuda")};
};
template <>
struct ChoiceNames<OptimizerKind> {
  static constexpr std::array table{named(OptimizerKind::Sgd, "sgd"), named(OptimizerKind::AdamW, "adamw"),
                                    named(OptimizerKind::Lars, "lars"), named(OptimizerKind::Lamb, "lamb")};
};
template <>
struct ChoiceNames<LrSchedule> {
  static constexpr std::array table{named(LrSchedule::Constant, "constant"), named(LrSchedule::Cosine, "cosine"),
                                    named(LrSchedule::Step, "step"), named(LrSchedule::Linear, "linear")};
};
template <>
struct ChoiceNames<ModelKind> {
  static constexpr std::array table{named(ModelKind::Mlp, "mlp"),
                                    named(ModelKind::ConvNet, "convnet"),
                                    named(ModelKind::Resnet18, "resnet18"),
                                    named(ModelKind::Resnet34, "resnet34"),
                                    named(ModelKind::Resnet50, "resnet50"),
                                    named(ModelKind::Resnet101, "resnet101"),
                                    named(ModelKind::Resnet152, "resnet152"),
                                    named(ModelKind::Cnn3d, "cnn3d"),
                                    named(ModelKind::Vit, "vit"),
                                    named(ModelKind::Gpt, "gpt"),
                                    named(ModelKind::Torchscript, "torchscript")};
};
template <>
struct ChoiceNames<Stem> {
  static constexpr std::array table{named(Stem::Auto, "auto"), named(Stem::Cifar, "cifar"),
                                    named(Stem::Imagenet, "imagenet")};
};
template <>
struct ChoiceNames<MemoryLayout> {
  static constexpr std::array table{named(MemoryLayout::Auto, "auto"), named(MemoryLayout::Contiguous, "contiguous"),
                                    named(MemoryLayout::ChannelsLast, "channels-last")};
};
template <>
struct ChoiceNames<TaskKind> {
  static constexpr std::array table{named(TaskKind::Classification, "classification"),
                                    named(TaskKind::Regression, "regression"), named(TaskKind::Lm, "lm")};
};
template <>
struct ChoiceNames<RegressionLoss> {
  static constexpr std::array table{named(RegressionLoss::Mse, "mse"), named(RegressionLoss::Huber, "huber")};
};
template <>
struct ChoiceNames<LogLevel> {
  static constexpr std::array table{named(LogLevel::Trace, "trace"), named(LogLevel::Debug, "debug"),
                                    named(LogLevel::Info, "info"), named(LogLevel::Warn, "warn"),
                                    named(LogLevel::Error, "error")};
};
template <>
struct ChoiceNames<ProgressMode> {
  static constexpr std::array table{named(ProgressMode::Auto, "auto"), named(ProgressMode::Bar, "bar"),
                                    named(ProgressMode::Lines, "lines")};
};

// The option text of `value` ("bf16").
template <Choice E>
constexpr std::string_view choice_name(E value) {
  for (const auto& [known, text] : ChoiceNames<E>::table)
    if (known == value) return text;
  return "?";
}

// The value named `text`, if it is one of E's names (exact, lower case).
template <Choice E>
constexpr std::optional<E> parse_choice(std::string_view text) {
  for (const auto& [known, name] : ChoiceNames<E>::table)
    if (name == text) return known;
  return std::nullopt;
}

// Every name of E, in table order.
template <Choice E>
std::vector<std::string> choice_names() {
  std::vector<std::string> names;
  for (const auto& entry : ChoiceNames<E>::table) names.emplace_back(entry.second);
  return names;
}

// "must be one of a, b, c": the one wording of a bad choice (config errors, tools, tests).
template <Choice E>
std::string choice_list() {
  std::string list;
  for (const auto& entry : ChoiceNames<E>::table) {
    if (!list.empty()) list += ", ";
    list += entry.second;
  }
  return list;
}

// Parses `text` or throws UsageError "OPTION: must be one of a, b, c (got 'TEXT')".
[[noreturn]] void reject_choice(const std::string& option, const std::string& text, const std::string& choices);
template <Choice E>
E parse_choice_or_throw(const std::string& text, const std::string& option) {
  if (auto value = parse_choice<E>(text)) return *value;
  reject_choice(option, text, choice_list<E>());
}

// --model: a network of the zoo by name, or `torchscript:PATH`, the user's own module scripted or
// traced in Python (ModelKind::Torchscript, with the file).
struct ModelName {
  ModelName() = default;
  ModelName(ModelKind kind, std::string path = {}) : kind(kind), path(std::move(path)) {}  // NOLINT: a zoo name

  ModelKind kind = ModelKind::Mlp;
  std::string path;  // Torchscript: the file, made absolute so a resumed or evaluated run finds it

  std::string text() const;  // the option's text: "resnet18" or "torchscript:/abs/model.pt"
  bool operator==(const ModelName&) const = default;
};

// Throws UsageError naming --model for an unknown name or a torchscript without its file.
ModelName parse_model_name(const std::string& text);

}  // namespace mnddp
