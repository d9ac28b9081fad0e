// parse_command_line for tests about other options: --train-data has no default, so a test that
// does not name one itself (on the command line, in its environment or through a config file) gets
// one from MNDDP_TRAIN_DATA, which a --train-data on its command line still beats.
#pragma once

#include <string>
#include <vector>

#include "mnddp/config.hpp"
#include "mnddp/env_info.hpp"

namespace mnddp::testing_support {

inline ParsedCommandLine parse_args(const std::vector<std::string>& args, Environment env = {}) {
  bool config_file = env.count("MNDDP_CONFIG") > 0;
  for (const auto& a : args) config_file |= a == "--config" || a.rfind("--config=", 0) == 0;
  if (!config_file) env.emplace("MNDDP_TRAIN_DATA", "train_*.h5");  // emplace keeps a test's own
  return parse_command_line(args, env);
}

}  // namespace mnddp::testing_support
