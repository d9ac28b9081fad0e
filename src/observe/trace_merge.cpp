// Joining per-rank trace files. Each file holds one event per line (trace_observer.cpp writes it so),
// so the merge streams lines: memory stays small for long runs, and a file cut short by a killed
// rank is kept up to its last complete event.
#include "mnddp/observe/trace_merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mnddp/error.hpp"
#include "mnddp/exit_codes.hpp"
#include "mnddp/observe/trace_observer.hpp"

namespace mnddp {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kHeaderEnd = "\"traceEvents\":[";

std::vector<fs::path> rank_files(const std::string& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error))
    throw UsageError(fmt::format("mnddp trace merge: '{}' is not a directory", directory));
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (trace_file_rank(name)) files.push_back(entry.path());
  }
  if (files.empty())
    throw UsageError(
        fmt::format("mnddp trace merge: no rank-NNNNN.trace.json file in '{}' (written by --trace)", directory));
  std::sort(files.begin(), files.end());
  return files;
}

// Copies one rank's events to `out`; false when the file ended before its closing bracket (a rank
// killed mid-run; an empty file: killed before its header). A line that is not an event (cut short
// by the kill) is counted in `skipped` and left out.
bool copy_events(const fs::path& file, std::ofstream& out, std::size_t& events, std::size_t& skipped) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line)) return false;
  if (!line.ends_with(kHeaderEnd))
    throw UsageError(
        fmt::format("mnddp trace merge: '{}' is not an mnddp trace file (its first line should end "
                    "with {})",
                    file.string(), kHeaderEnd));
  while (std::getline(in, line)) {
    if (line == "]}") return true;
    std::string_view event = line;
    if (event.ends_with(',')) event.remove_suffix(1);
    if (!event.starts_with('{') || !nlohmann::json::accept(event)) {
      ++skipped;
      continue;
    }
    out << (events++ == 0 ? "\n" : ",\n") << event;
  }
  return false;
}

}  // namespace

TraceMergeResult merge_traces(const std::string& directory, std::string output) {
  const auto files = rank_files(directory);
  TraceMergeResult result;
  result.output = output.empty() ? (fs::path(directory) / "merged.trace.json").string() : std::move(output);
  const std::string temp = result.output + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out) throw UsageError(fmt::format("mnddp trace merge: cannot write '{}'", temp));
    out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"ranks\":" << files.size() << "},\"traceEvents\":[";
    for (const auto& file : files) {
      if (!copy_events(file, out, result.events, result.skipped_lines)) result.repaired.push_back(file.string());
      ++result.ranks;
    }
    out << "\n]}\n";
    if (!out.flush()) throw UsageError(fmt::format("mnddp trace merge: writing '{}' failed", temp));
  }
  fs::rename(temp, result.output);  // never a half-written merge under the final name
  return result;
}

int trace_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf(
        "Usage: mnddp trace merge DIR [--output FILE]\n\n"
        "Joins the per-rank timelines of a --trace directory into one Chrome-trace file with a track per\n"
        "rank (default DIR/merged.trace.json). Open it in https://ui.perfetto.dev or chrome://tracing.\n");
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] != "merge")
    throw UsageError(fmt::format("mnddp trace: unknown subcommand '{}' (try 'mnddp trace --help')", args[0]));
  std::string directory;
  std::string output;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--output" || args[i] == "-o") {
      if (i + 1 == args.size()) throw UsageError("mnddp trace merge: --output needs a file name");
      output = args[++i];
    } else if (args[i].starts_with("--output=")) {
      output = args[i].substr(std::string_view("--output=").size());
    } else if (directory.empty() && !args[i].starts_with('-')) {
      directory = args[i];
    } else {
      throw UsageError(fmt::format("mnddp trace merge: unexpected argument '{}'", args[i]));
    }
  }
  if (directory.empty()) throw UsageError("mnddp trace merge: the trace directory is missing (mnddp trace merge DIR)");
  const TraceMergeResult merged = merge_traces(directory, output);
  for (const auto& file : merged.repaired)
    std::fprintf(stderr, "mnddp trace merge: warning: '%s' ended early (a killed rank?); kept its complete events\n",
                 file.c_str());
  if (merged.skipped_lines > 0)
    std::fprintf(stderr, "mnddp trace merge: warning: %zu lines that are not events (cut short) left out\n",
                 merged.skipped_lines);
  std::printf("%s: %d ranks, %zu events\n", merged.output.c_str(), merged.ranks, merged.events);
  return kExitOk;
}

}  // namespace mnddp
