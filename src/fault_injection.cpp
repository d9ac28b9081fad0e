// Parsing of --inject-fault specs.
#include "mnddp/fault_injection.hpp"

#include <fmt/format.h>

#include <array>
#include <regex>

#include "mnddp/error.hpp"

namespace mnddp {

FaultPlan parse_fault_plan(const std::string& spec) {
  if (spec.empty()) return {};
  static const std::regex kForm(R"(([a-z-]+)@([0-9]+)(:([0-9]+))?)");
  static const std::array<const char*, 2> kKinds = {"checkpoint-kill", "checkpoint-fail"};
  std::smatch match;
  if (!std::regex_match(spec, match, kForm))
    throw UsageError(fmt::format("--inject-fault: '{}' is not KIND@STEP[:RANK] (e.g. checkpoint-kill@20)", spec));
  FaultPlan plan;
  plan.kind = match[1];
  plan.step = std::stoll(match[2]);
  if (match[4].matched) plan.rank = std::stoi(match[4]);
  bool known = false;
  for (const char* kind : kKinds) known = known || plan.kind == kind;
  if (!known)
    throw UsageError(
        fmt::format("--inject-fault: unknown fault '{}' (choose from {})", plan.kind, fmt::join(kKinds, ", ")));
  return plan;
}

}  // namespace mnddp
