// mnddp-data: command-line tools for mnddp's HDF5 training data. This file only dispatches; each
// subcommand lives in its own file here, the shared work in the mnddp_base library (src/data).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "mnddp/program_options_message.hpp"

namespace mnddp::tools {
namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(std::span<const std::string> args);
};

constexpr Subcommand kSubcommands[] = {
    {"synth", "write a synthetic classification or regression dataset (HDF5 shards)", run_synth},
    {"convert", "convert .npy, .csv, MNIST IDX or CIFAR-10 binary files into HDF5 shards", run_convert},
    {"reshard", "rewrite HDF5 shards as N balanced shards, optionally shuffled and compressed", run_reshard},
    {"inspect", "describe HDF5 shards and check that they form one dataset", run_inspect},
    {"stats", "compute per-feature mean and std for input normalisation", run_stats},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: mnddp-data <command> [options]\n\ncommands:\n");
  for (const auto& command : kSubcommands) std::fprintf(out, "  %-10s %s\n", command.name, command.summary);
  std::fprintf(out, "\nRun 'mnddp-data <command> --help' for a command's options.\n");
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) {
    print_usage(stderr);
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  for (const auto& command : kSubcommands)
    if (args[0] == command.name) return command.run(std::span(args).subspan(1));
  std::vector<std::string> names;
  for (const auto& command : kSubcommands) names.emplace_back(command.name);
  throw UsageError(
      fmt::format("unknown command '{}' (commands: {}; see mnddp-data --help)", args[0], fmt::join(names, ", ")));
}

}  // namespace
}  // namespace mnddp::tools

int main(int argc, char** argv) {
  mnddp::h5_silence_default_errors();
  try {
    return mnddp::tools::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const mnddp::Error& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return e.exit_code();
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", mnddp::program_options_message(e).c_str());
    return mnddp::kExitUsage;
  } catch (const std::filesystem::filesystem_error& e) {
    // An output path that cannot be made or replaced (a directory in the way): the user's to fix.
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return mnddp::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnddp-data: error: %s\n", e.what());
    return mnddp::kExitFailure;
  }
}
