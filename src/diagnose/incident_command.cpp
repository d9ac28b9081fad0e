// mnddp incident FILE [--run ID] [--all]: the verdict first, then the details.
#include "mnddp/diagnose/incident_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>

#include "mnddp/diagnose/incident_schema.hpp"
#include "mnddp/error.hpp"
#include "mnddp/exit_codes.hpp"

namespace mnddp {

std::vector<nlohmann::json> read_incident_records(const std::string& path, const std::string& run) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("mnddp incident: cannot open '{}'", path));
  std::vector<nlohmann::json> records;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut short (the job killed mid-write) is skipped, not fatal: the others still tell.
    if (record.is_discarded()) {
      std::fprintf(stderr, "mnddp incident: '%s' line %d is not a complete record; skipped\n", path.c_str(), number);
      continue;
    }
    if (const auto problem = incident_record_problem(record)) {
      std::fprintf(stderr, "mnddp incident: '%s' line %d is not an incident record (%s); skipped\n", path.c_str(),
                   number, problem->c_str());
      continue;
    }
    records.push_back(std::move(record));
  }
  if (records.empty()) throw UsageError(fmt::format("mnddp incident: '{}' holds no incident record", path));
  const std::string chosen = run.empty() ? records.back().value("incident", "") : run;
  std::vector<nlohmann::json> of_run;
  for (auto& record : records)
    if (record.value("incident", "") == chosen) of_run.push_back(std::move(record));
  if (of_run.empty()) throw UsageError(fmt::format("mnddp incident: --run '{}': no such run in '{}'", run, path));
  return of_run;
}

int incident_command(const std::vector<std::string>& args) {
  std::string path, run;
  bool all = false, culprit_ranks = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf(
          "Usage: mnddp incident FILE [--run ID] [--all] [--culprit-ranks]\n\n"
          "Explains a failed job from its incident file (--incident-file, default incident.jsonl): one verdict\n"
          "line (which rank, in which collective, doing what, for how long), then every rank's state, and the\n"
          "threads, stacks and last collectives of the ranks the verdict names.\n"
          "  --run ID  the run to explain (the file keeps every run's incidents; default: the latest)\n"
          "  --all     details for every rank\n"
          "  --culprit-ranks  print only the ranks the verdict names, on one line (for job scripts:\n"
          "                   slurm/train_resilient.sbatch leaves their nodes out of the next launch)\n");
      return kExitOk;
    }
    if (args[i] == "--all") {
      all = true;
    } else if (args[i] == "--culprit-ranks") {
      culprit_ranks = true;
    } else if (args[i] == "--run" && i + 1 < args.size()) {
      run = args[++i];
    } else if (args[i].starts_with("-") || !path.empty()) {
      throw UsageError(fmt::format("mnddp incident: unexpected argument '{}' (see mnddp incident --help)", args[i]));
    } else {
      path = args[i];
    }
  }
  if (path.empty()) throw UsageError("mnddp incident: FILE is needed (the job's --incident-file)");
  const auto records = read_incident_records(path, run);
  const IncidentVerdict verdict = explain_incident(records, all);
  if (culprit_ranks) {
    std::printf("%s\n", fmt::format("{}", fmt::join(verdict.culprits, " ")).c_str());
    return kExitOk;
  }
  std::printf("incident %s: %zu record(s)\nverdict: %s\n\n%s", records.front().value("incident", "").c_str(),
              records.size(), verdict.verdict.c_str(), verdict.details.c_str());
  return kExitOk;
}

}  // namespace mnddp
