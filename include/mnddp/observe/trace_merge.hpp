// mnddp trace merge DIR: the per-rank trace files of a --trace directory joined into one
// Chrome-trace file with a track (process) per rank. A rank's file that a killed run left without
// its closing bracket (or empty) gives its complete events; a line cut short is left out.
#pragma once

#include <string>
#include <vector>

namespace mnddp {

struct TraceMergeResult {
  std::string output;
  int ranks = 0;
  std::size_t events = 0;
  std::vector<std::string> repaired;  // files without their end (a killed rank): their complete events kept
  std::size_t skipped_lines = 0;      // lines that were not events (cut short), left out
};

// Throws UsageError (naming the directory or file) when there is nothing to merge or a file is not
// a trace. `output` "" writes DIR/merged.trace.json.
TraceMergeResult merge_traces(const std::string& directory, std::string output = {});

// `mnddp trace ...` (the arguments after "trace"); an exit code.
int trace_command(const std::vector<std::string>& args);

}  // namespace mnddp
