// Property test: every option value the command line accepts comes back exactly from the text rank 0
// broadcasts (to_ini, parse_ini_text: main.cpp) and from --print-config's text read as options.
// Configurations are generated from the option table itself, so a new option is covered the day it
// is added: a few random options per configuration, values of each option's type, at the edges of
// what text can carry (every digit of a double, strings with INI's special characters, durations
// of every form and length).
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "config_table.hpp"
#include "mnddp/config.hpp"
#include "mnddp/error.hpp"

using namespace mnddp;
using config_detail::OptionSpec;

namespace {

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : random_(seed) {}

  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_); }
  bool coin() { return below(2) == 0; }
  template <typename T>
  const T& pick(const std::vector<T>& from) {
    return from[below(from.size())];
  }

  std::string integer() {
    switch (below(4)) {
      case 0:
        return std::to_string(static_cast<std::int64_t>(below(10)));
      case 1:
        return std::to_string(static_cast<std::int64_t>(below(100000)) - 50000);
      case 2:
        return std::to_string(static_cast<std::int64_t>(random_()));
      default:
        return pick<std::string>({"9223372036854775807", "-9223372036854775808", "2147483648", "-1", "0", "1"});
    }
  }

  std::string floating() {
    double value = 0;
    switch (below(4)) {
      case 0:
        value = static_cast<double>(below(1000)) / 1000.0;
        break;
      case 1: {
        const std::uint64_t bits = random_();
        std::memcpy(&value, &bits, sizeof value);
        if (!std::isfinite(value)) value = 0.1 + 0.2;
        break;
      }
      case 2:
        value = std::ldexp(static_cast<double>(random_() >> 11), -static_cast<int>(below(80)));
        break;
      default:
        value = pick<double>({0.1 + 0.2, 1e-8, 5e-324, 1.7976931348623157e308, -0.0, 1.0 / 3.0});
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
  }

  // Printable text with the characters INI files and shells treat specially, and UTF-8.
  std::string text() {
    static const std::vector<std::string> pieces = {"a", "Z",  "0", " ",  "/",  "#",  ";",        "=",        "\"",
                                                    "'", "\\", "[", "]",  "$",  "%",  "\xc3\xa9", "*",        ",",
                                                    ":", "@",  "~", "..", "\t", "{}", "${X}",     "step-1.h5"};
    std::string out;
    const std::size_t length = below(12);
    for (std::size_t i = 0; i < length; ++i) out += pick(pieces);
    return out;
  }

  std::string duration() {
    const auto n = [&](std::size_t below_value) { return std::to_string(below(below_value)); };
    switch (below(6)) {
      case 0:
        return n(100000000);
      case 1:
        return n(100) + ":" + n(60);
      case 2:
        return n(100) + ":" + n(60) + ":" + n(60);
      case 3:
        return n(30) + "-" + n(24) + ":" + n(60) + ":" + n(60);
      case 4:
        return n(30) + "-" + n(24);
      default:
        return n(1000) + pick<std::string>({"s", "m", "h", "d", "min", "sec"});
    }
  }

  // A value for `option`, by its type (and, for the options parsed from their own syntax, by name).
  std::string value_for(const OptionSpec& option) {
    const std::string& type = option.type_name;
    if (option.name == "deadline") return pick<std::string>({"auto", "none", duration(), duration()});
    if (option.name == "resume") return pick<std::string>({"auto", "none", "/ckpt/" + text() + ".h5"});
    if (option.name == "model")
      return coin() ? pick<std::string>({"mlp", "convnet", "resnet18", "vit", "gpt"}) : "torchscript:" + text() + ".pt";
    if (option.name == "preempt-signals") {
      std::string list = pick<std::string>({"USR1", "SIGUSR2", "TERM", "10", "XCPU", "hup"});
      if (coin()) list += "," + pick<std::string>({"INT", "12", "SIGQUIT"});
      return list;
    }
    if (option.name == "inject-fault")
      return pick<std::string>({"", "crash", "hang", "nan-loss", "stall", "checkpoint-stall"}) + "@" +
             std::to_string(1 + below(1000)) + (coin() ? ":" + std::to_string(below(8)) : "");
    if (type == "int") return integer();
    if (type == "float") return floating();
    if (type == "bool") return pick<std::string>({"true", "false", "1", "0"});
    if (type.find(" | ") != std::string::npos) {  // a closed choice: one of its names
      std::vector<std::string> names;
      for (std::size_t start = 0; start <= type.size();) {
        const std::size_t bar = type.find(" | ", start);
        names.push_back(type.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
        if (bar == std::string::npos) break;
        start = bar + 3;
      }
      return pick(names);
    }
    return text();
  }

 private:
  std::mt19937_64 random_;
};

}  // namespace

TEST(ConfigRoundTrip, EveryAcceptedValueComesBackExactly) {
  // --train-data has no default; a generated --train-data beats this one.
  const Environment kData = {{"MNDDP_TRAIN_DATA", "train_*.h5"}};
  const auto& table = config_detail::option_table();
  Generator generate(20261205);
  int accepted = 0;
  int tried = 0;
  // Fewer under a sanitizer (MNDDP_TEST_TIME_SCALE, set by scripts/asan.sh and the others): with
  // every allocation's stack unwound in full (asan.sh) a parse costs 80 times more, and a thousand
  // configurations still pick every option dozens of times.
  const char* scale_text = std::getenv("MNDDP_TEST_TIME_SCALE");
  const int scale = std::max(1, scale_text != nullptr ? std::atoi(scale_text) : 1);
  const int trials = 4000 / scale;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<std::string> args;
    std::vector<const OptionSpec*> chosen;
    const std::size_t count = 1 + generate.below(6);
    for (std::size_t i = 0; i < count; ++i) {
      const OptionSpec& option = table[generate.below(table.size())];
      if (option.name == "config" || option.name == "help" || option.name == "print-config") continue;
      bool repeated = false;
      for (const auto* c : chosen) repeated |= c == &option;
      if (repeated) continue;
      chosen.push_back(&option);
      args.push_back("--" + option.name + "=" + generate.value_for(option));
    }
    ++tried;
    TrainingConfig config;
    try {
      config = parse_command_line(args, kData).config;
    } catch (const UsageError&) {
      continue;  // out of range or against a rule between options: refused, which is fine
    }
    ++accepted;
    std::string shown;
    for (const auto& a : args) shown += " '" + a + "'";
    // The broadcast: rank 0's text, read by every rank.
    const std::string ini = to_ini(config);
    TrainingConfig received;
    ASSERT_NO_THROW(received = parse_ini_text(ini)) << shown << "\n" << ini;
    ASSERT_EQ(received, config) << "options:" << shown << "\nINI:\n" << ini;
    // --print-config's values, given back as options.
    std::vector<std::string> again;
    for (const auto* option : chosen) again.push_back("--" + option->name + "=" + option->format(config));
    TrainingConfig reparsed;
    ASSERT_NO_THROW(reparsed = parse_command_line(again, kData).config) << shown;
    ASSERT_EQ(reparsed, config) << "options:" << shown;
  }
  std::printf("%d of %d generated configurations accepted, each read back exactly\n", accepted, tried);
  // Most configurations must be valid ones, or the test tests nothing.
  EXPECT_GT(accepted, tried / 3) << accepted << " of " << tried << " accepted";
}
