// --inject-fault specs: parsed once, with the config.
#include "mnddp/fault/fault_plan.hpp"

#include <fmt/format.h>

#include <regex>
#include <stdexcept>

#include "mnddp/error.hpp"

namespace mnddp {

std::string FaultPlan::spec() const {
  if (!active()) return "";
  const std::string_view name = choice_name(kind);
  return rank < 0 ? fmt::format("{}@{}", name, step) : fmt::format("{}@{}:{}", name, step, rank);
}

FaultPlan parse_fault_plan(const std::string& spec) {
  if (spec.empty()) return {};
  static const std::regex kForm(R"(([a-z-]+)@([0-9]+)(:([0-9]+))?)");
  std::smatch match;
  if (!std::regex_match(spec, match, kForm))
    throw UsageError(fmt::format("--inject-fault: '{}' is not KIND@STEP[:RANK] (e.g. crash@20:1)", spec));
  const auto kind = parse_choice<FaultKind>(match[1].str());
  if (!kind)
    throw UsageError(
        fmt::format("--inject-fault: unknown fault '{}' (choose from {})", match[1].str(), choice_list<FaultKind>()));
  FaultPlan plan;
  plan.kind = *kind;
  try {
    plan.step = std::stoll(match[2]);
    if (match[4].matched) plan.rank = std::stoi(match[4]);
  } catch (const std::out_of_range&) {
    throw UsageError(fmt::format("--inject-fault: '{}': the step or rank is out of range", spec));
  }
  return plan;
}

}  // namespace mnddp
