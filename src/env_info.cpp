// Reading the process environment into a map.
#include "mnddp/env_info.hpp"

#include <cstdlib>

extern char** environ;

namespace mnddp {

Environment environment_from_process() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

std::optional<std::string> env_value(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::optional<long> env_int(const Environment& env, const std::string& name) {
  const auto text = env_value(env, name);
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return value;
}

}  // namespace mnddp
