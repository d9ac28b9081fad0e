// Rank-aware logging on spdlog: every line carries "rank r/W". Rank 0 logs at the configured level,
// the other ranks only warnings and errors, unless log_all_ranks is set.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "mnddp/choices.hpp"

namespace mnddp {

struct LogSetup {
  int rank = 0;
  int world_size = 1;
  LogLevel level = LogLevel::Info;
  bool all_ranks = false;
};

// Installs the default spdlog logger (stdout). Call once, early; safe to call again to change levels.
void init_logging(const LogSetup& setup);

// A line redrawn in place at the bottom of stdout (the progress bar): log lines appear above it.
// end_status_line() leaves its last state on screen and goes back to plain lines.
void set_status_line(std::string text);
void end_status_line();

}  // namespace mnddp
