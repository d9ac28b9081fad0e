// mnddp incident FILE: reads an incident file (diagnose/incident.hpp), picks one run's records (the
// latest, or --run ID), and prints one verdict (which rank, in which call, doing what, for how long),
// then the details: every rank's state, the culprits' threads with their stacks (named with addr2line
// where the module is at hand) and their last collectives.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mnddp {

struct IncidentVerdict {
  std::string verdict;        // one line
  std::vector<int> culprits;  // the ranks it names
  std::string details;        // many lines
};

// `records`: one run's lines, in file order. `all_ranks`: details for every rank, not only the culprits.
IncidentVerdict explain_incident(const std::vector<nlohmann::json>& records, bool all_ranks = false);

// The records of run `run` ("" for the file's latest run); throws UsageError naming the file.
std::vector<nlohmann::json> read_incident_records(const std::string& path, const std::string& run = {});

int incident_command(const std::vector<std::string>& args);

}  // namespace mnddp
