// A plan's measured inputs as JSON: written inside `mnddp plan --json FILE` ("inputs"), read back by
// `mnddp train --plan FILE`, which predicts its own configuration from them and prints the
// prediction beside what it measured. Pure.
#pragma once

#include <string>

#include "mnddp/plan/scaling_plan.hpp"

namespace mnddp {

std::string plan_inputs_json(const PlanInputs& inputs);
// `text`: a plan file (its "inputs") or the inputs alone. Throws UsageError naming `what`.
PlanInputs parse_plan_inputs(const std::string& text, const std::string& what);
// Reads FILE (at most 64 MiB); UsageError naming `option` and the path when it cannot.
PlanInputs load_plan_inputs(const std::string& path, const std::string& option = "--plan");

}  // namespace mnddp
