// The plan's JSON inputs (a network profile, a plan for --plan) read whole, with a bound: a wrong path
// that names a huge file gets a one-line refusal, not the memory it would take.
#pragma once

#include <cstdint>
#include <string>

namespace mnddp {

// The text of the regular file at `path`. Throws UsageError starting with `what` (the option and the
// path) when it is larger than `max_bytes` or cannot be read.
std::string read_plan_input_file(const std::string& path, const std::string& what, std::uintmax_t max_bytes);

}  // namespace mnddp
