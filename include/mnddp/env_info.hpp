// The process environment as a map, so code that reads it can be tested with a made-up one.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace mnddp {

using Environment = std::map<std::string, std::string>;

Environment environment_from_process();
std::optional<std::string> env_value(const Environment& env, const std::string& name);
std::optional<long> env_int(const Environment& env, const std::string& name);  // nullopt if unset or not a number

}  // namespace mnddp
