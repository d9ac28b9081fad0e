// The one wording of a bad choice.
#include "mnddp/choices.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "mnddp/error.hpp"

namespace mnddp {

void reject_choice(const std::string& option, const std::string& text, const std::string& choices) {
  throw UsageError(fmt::format("{}: must be one of {} (got '{}')", option, choices, text));
}

std::string ModelName::text() const {
  return kind == ModelKind::Torchscript ? "torchscript:" + path : std::string(choice_name(kind));
}

ModelName parse_model_name(const std::string& text) {
  constexpr std::string_view prefix = "torchscript:";
  if (text.starts_with(prefix)) {
    const std::string file = text.substr(prefix.size());
    if (file.empty()) throw UsageError("--model torchscript: needs the module's file, as torchscript:PATH");
    return ModelName{ModelKind::Torchscript, std::filesystem::absolute(file).lexically_normal().string()};
  }
  const auto kind = parse_choice<ModelKind>(text);
  if (kind && *kind != ModelKind::Torchscript) return ModelName{*kind, {}};
  std::string zoo;
  for (const auto& [known, name] : ChoiceNames<ModelKind>::table)
    if (known != ModelKind::Torchscript) zoo += std::string(name) + ", ";
  throw UsageError(fmt::format("--model: must be one of {}or torchscript:PATH (got '{}')", zoo, text));
}

}  // namespace mnddp
