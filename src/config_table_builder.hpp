// Internal to config_options.cpp: how a row of the option table is made. Formatting a value for
// --help and docs/CONFIG.md, the range checks, and TableBuilder, which binds a TrainingConfig field to
// Boost.Program_options with its check (add), its own parser (parsed) or a closed choice (choice).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config_table.hpp"
#include "mnddp/error.hpp"

namespace mnddp::config_detail {
namespace table_builder {

namespace po = boost::program_options;

template <typename T>
std::string format_value(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    return fmt::format("{}", value);  // shortest text that reads back to the same double
  }
}

template <typename T>
std::string type_name_of() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, std::string>) return "string";
  if constexpr (std::is_floating_point_v<T>) return "float";
  return "int";
}

[[noreturn]] inline void reject(const std::string& name, const std::string& value, const std::string& why) {
  throw UsageError(fmt::format("--{}: {} (got '{}')", name, why, value));
}

// --- Checks: each returns an empty string when the value is fine, else what is wrong ---------
template <typename T>
using Check = std::function<std::string(const T&)>;

template <typename T>
Check<T> at_least(T low) {
  return [low](const T& v) {
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v)) return std::string("must be a finite number");
    return v >= low ? std::string() : fmt::format("must be >= {}", low);
  };
}

template <typename T>
Check<T> greater_than(T low) {
  return [low](const T& v) {
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v)) return std::string("must be a finite number");
    return v > low ? std::string() : fmt::format("must be > {}", low);
  };
}

inline Check<double> in_half_open(double low, double high) {
  return [low, high](const double& v) {
    return (std::isfinite(v) && v >= low && v < high) ? std::string() : fmt::format("must be in [{}, {})", low, high);
  };
}

inline Check<std::string> not_empty() {
  return [](const std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); };
}

// Boost's config-file parser cuts a line at '#', so a value containing one cannot round-trip.
inline Check<std::string> any_text() {
  return [](const std::string& v) {
    return v.find('#') == std::string::npos ? std::string() : std::string("must not contain '#'");
  };
}

// A tri-state switch: auto (nullopt), or Boost's spellings of a boolean.
inline std::function<std::optional<bool>(const std::string&)> parse_auto_bool(std::string name) {
  return [name](const std::string& text) -> std::optional<bool> {
    if (text == "auto") return std::nullopt;
    if (text == "true" || text == "on" || text == "yes" || text == "1") return true;
    if (text == "false" || text == "off" || text == "no" || text == "0") return false;
    reject(name, text, "must be auto, true or false");
  };
}

inline std::string format_auto_bool(const std::optional<bool>& value) {
  if (!value) return "auto";
  return *value ? "true" : "false";
}

inline std::string choices_type(const std::vector<std::string>& choices) {
  return fmt::format("{}", fmt::join(choices, " | "));
}

class TableBuilder {
 public:
  explicit TableBuilder(std::vector<OptionSpec>& rows) : rows_(rows) {}
  void group(std::string name) { group_ = std::move(name); }

  template <typename T>
  void add(const char* name, T TrainingConfig::*field, const char* help, Check<T> check, std::string type = {}) {
    OptionSpec row;
    row.name = name;
    row.group = group_;
    row.type_name = type.empty() ? type_name_of<T>() : std::move(type);
    row.help = help;
    row.bind = [name, field, help](po::options_description& desc, TrainingConfig& target,
                                   const TrainingConfig& defaults) {
      auto* value = po::value<T>(&(target.*field))->default_value(defaults.*field, format_value(defaults.*field));
      if constexpr (std::is_same_v<T, bool>) value->implicit_value(true, "true");
      desc.add_options()(name, value, help);
    };
    row.format = [field](const TrainingConfig& c) { return format_value(c.*field); };
    row.check = [name = std::string(name), field, check](const TrainingConfig& c) {
      if (!check) return;
      const std::string problem = check(c.*field);
      if (!problem.empty()) reject(name, format_value(c.*field), problem);
    };
    rows_.push_back(std::move(row));
  }

  // A field parsed from its text when the sources are merged (Boost's notifier), so a bad value
  // is one UsageError from `parse`, whichever source gave it; `format` is its inverse.
  // `help_suffix` is added to --help's text only (docs/CONFIG.md has a column for the type).
  template <typename T>
  void parsed(const char* name, T TrainingConfig::*field, const char* help, std::string type,
              std::function<T(const std::string&)> parse, std::function<std::string(const T&)> format,
              const std::string& help_suffix = {}, const std::string& implicit = {}) {
    OptionSpec row;
    row.name = name;
    row.group = group_;
    row.type_name = std::move(type);
    row.help = help;
    row.bind = [name, field, described = help + help_suffix, parse, format, implicit](
                   po::options_description& desc, TrainingConfig& target, const TrainingConfig& defaults) {
      const std::string fallback = format(defaults.*field);
      auto* value = po::value<std::string>()
                        ->default_value(fallback, fallback)
                        ->notifier([&target, field, parse](const std::string& text) { target.*field = parse(text); });
      if (!implicit.empty()) value->implicit_value(implicit, implicit);  // a bare --flag
      desc.add_options()(name, value, described.c_str());
    };
    row.format = [field, format](const TrainingConfig& c) { return format(c.*field); };
    row.check = [](const TrainingConfig&) {};  // a parsed value is valid by construction
    rows_.push_back(std::move(row));
  }

  // A closed choice: its names, --help's list and the error text all come from ChoiceNames<E>.
  template <Choice E>
  void choice(const char* name, E TrainingConfig::*field, const char* help) {
    const std::string option = std::string("--") + name;
    const std::string names = choices_type(choice_names<E>());
    parsed<E>(
        name, field, help, names, [option](const std::string& text) { return parse_choice_or_throw<E>(text, option); },
        [](const E& value) { return std::string(choice_name(value)); }, " (" + names + ")");
  }

 private:
  std::vector<OptionSpec>& rows_;
  std::string group_;
};

}  // namespace table_builder
}  // namespace mnddp::config_detail
