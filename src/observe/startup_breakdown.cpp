// The start-up breakdown: phases on the steady clock, measured from the process's start.
#include "mnddp/observe/startup_breakdown.hpp"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace mnddp {

void StartupBreakdown::mark(std::string_view phase) {
  std::lock_guard lock(mutex_);
  if (!finished_) append(phase);
}

bool StartupBreakdown::finish(std::string_view phase) {
  std::lock_guard lock(mutex_);  // one critical section: two callers cannot both finish
  if (finished_) return false;
  append(phase);
  finished_ = true;
  return true;
}

void StartupBreakdown::append(std::string_view phase) {
  const Clock::time_point now = Clock::now();
  phases_.push_back({std::string(phase), std::chrono::duration<double>(now - last_).count()});
  last_ = now;
}

bool StartupBreakdown::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

std::vector<StartupBreakdown::Phase> StartupBreakdown::phases() const {
  std::lock_guard lock(mutex_);
  return phases_;
}

double StartupBreakdown::total_seconds() const {
  std::lock_guard lock(mutex_);
  return std::chrono::duration<double>(last_ - start_).count();
}

std::string StartupBreakdown::describe() const {
  std::string text = fmt::format("{:.2f} s from process start", total_seconds());
  const char* separator = ": ";
  for (const Phase& phase : phases()) {
    text += fmt::format("{}{} {:.2f} s", separator, phase.name, phase.seconds);
    separator = ", ";
  }
  return text;
}

StartupBreakdown::Clock::time_point process_start_time() {
  const StartupBreakdown::Clock::time_point now = StartupBreakdown::Clock::now();
  // Field 22 of /proc/self/stat, after the command name in parentheses (which may hold spaces).
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return now;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return now;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long start_ticks = 0;
  timespec boot{};
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (!(fields >> start_ticks) || hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return now;
  const double since_boot = static_cast<double>(boot.tv_sec) + static_cast<double>(boot.tv_nsec) * 1e-9;
  const double age = since_boot - static_cast<double>(start_ticks) / static_cast<double>(hz);
  if (age < 0.0 || age > 3600.0) return now;  // not plausible for a start-up: measure from here
  return now - std::chrono::duration_cast<StartupBreakdown::Clock::duration>(std::chrono::duration<double>(age));
}

StartupBreakdown& process_startup() {
  static StartupBreakdown startup(process_start_time());
  return startup;
}

}  // namespace mnddp
