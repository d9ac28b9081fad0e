// Internal: the option table behind TrainingConfig (one row per option) and its Boost binding.
#pragma once

#include <boost/program_options.hpp>

#include <functional>
#include <string>
#include <vector>

#include "mnddp/config.hpp"

namespace mnddp::config_detail {

struct OptionSpec {
  std::string name;       // command-line and INI key, e.g. "batch-size"
  std::string group;      // section of --help
  std::string type_name;  // int, float, string, bool, or "a | b | c"
  std::string help;
  // Adds a Boost value bound to the field of `target`, with `defaults` as its default value.
  std::function<void(boost::program_options::options_description&, TrainingConfig& target,
                     const TrainingConfig& defaults)>
      bind;
  std::function<std::string(const TrainingConfig&)> format;
  // Throws UsageError naming the option when the value is out of range.
  std::function<void(const TrainingConfig&)> check;
};

const std::vector<OptionSpec>& option_table();
const std::vector<std::string>& option_groups();  // in display order

}  // namespace mnddp::config_detail
