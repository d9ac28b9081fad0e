// Where a rank's start-up went, phase by phase, from the process's own start (as the kernel records
// it: library loading counts) to its first batch: logged at debug level when the first step has its
// batch, and kept for the end of the run. No torch, no MPI: phases are whatever the callers mark.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace mnddp {

class StartupBreakdown {
 public:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    std::string name;
    double seconds = 0.0;
  };

  explicit StartupBreakdown(Clock::time_point start) : start_(start), last_(start) {}

  // `phase` ended now; it began where the previous phase ended (at the start for the first). A mark
  // after finish() is ignored: start-up is over.
  void mark(std::string_view phase);
  // Marks the last phase; true the first time only (the caller reports the breakdown once).
  bool finish(std::string_view phase);

  bool finished() const;
  std::vector<Phase> phases() const;
  double total_seconds() const;  // start to the last mark
  // "2.41 s from process start: libraries 0.40 s, MPI init 0.31 s, ..., first batch 0.05 s"
  std::string describe() const;

 private:
  void append(std::string_view phase);  // caller holds mutex_

  mutable std::mutex mutex_;
  Clock::time_point start_;
  Clock::time_point last_;
  std::vector<Phase> phases_;
  bool finished_ = false;
};

// When this process started, on the steady clock: the kernel's start time of the process
// (/proc/self/stat, clock ticks since boot) against CLOCK_BOOTTIME; now, where that cannot be read.
StartupBreakdown::Clock::time_point process_start_time();

// The breakdown of this process's start-up (one per process: start-up happens once).
StartupBreakdown& process_startup();

}  // namespace mnddp
