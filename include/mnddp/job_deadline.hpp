// When the job will be ended, so that the last checkpoint is taken in time even when no warning
// signal comes (a batch script without --signal, a container without scontrol's signal relay).
// --deadline auto reads the Slurm job's end time: squeue, else scontrol, else SLURM_JOB_END_TIME
// (Slurm 23.02 and later); --deadline DURATION counts from the start; --deadline none turns it off.
// Rank 0 asks (one squeue call per job, not one per rank); the checkpointer broadcasts the answer.
#pragma once

#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/env_info.hpp"

namespace mnddp {

struct DeadlineRequest {
  enum class Mode { Auto, None, After };
  Mode mode = Mode::Auto;
  double seconds = 0.0;  // After: seconds from the start
  bool operator==(const DeadlineRequest&) const = default;
};

// "auto", "none", or a duration: "3600", "90s", "45m", "2h", "1h30m", "MM:SS", "HH:MM:SS",
// "D-HH:MM:SS" (Slurm's --time forms). Throws UsageError naming --deadline.
DeadlineRequest parse_deadline(const std::string& text);
std::string format_deadline(const DeadlineRequest& request);
// A duration in seconds, or nullopt when `text` is not one.
std::optional<double> parse_duration(const std::string& text);
// Slurm's local time stamp "2026-12-02T16:00:00"; nullopt for "Unknown", "NONE", "N/A" or junk.
std::optional<std::time_t> parse_slurm_time(const std::string& text);

struct JobEnd {
  double seconds_left = 0.0;  // from the moment it was found
  std::string source;         // "squeue", "scontrol", "SLURM_JOB_END_TIME", "--deadline 20m"
};

// Runs a program (an argument vector, no shell) for at most 10 s and returns its standard output
// ("" when it fails or is missing).
using CommandRunner = std::function<std::string(const std::vector<std::string>& argv)>;
std::string run_command(const std::vector<std::string>& argv);

// The job's end as `request` says, nullopt when there is none (not under Slurm, no time limit).
std::optional<JobEnd> find_job_end(const DeadlineRequest& request, const Environment& env,
                                   const CommandRunner& run = run_command, std::time_t now = std::time(nullptr));

}  // namespace mnddp
