// Running another program without a shell: an argument vector through posix_spawnp, its standard
// output read back, its life bounded. No value read from a file, an option or the environment ever
// passes through a shell (an incident file's module path once ran `touch` through one). posix_spawn
// uses vfork-like spawning, so an MPI process with registered memory does not copy its page tables.
#pragma once

#include <string>
#include <vector>

namespace mnddp {

struct ProgramResult {
  bool started = false;    // false: the program could not be run (missing, not executable)
  bool timed_out = false;  // killed (SIGKILL) at the deadline
  int exit_code = -1;      // its exit status, or -1 (a signal, not started)
  std::string output;      // its standard output (its standard error goes to /dev/null)
};

// Runs argv[0] (searched on PATH) with `argv`, stdin from /dev/null, for at most `timeout_s`
// seconds; the child starts with no blocked signals and default handlers.
ProgramResult run_program(const std::vector<std::string>& argv, double timeout_s);

}  // namespace mnddp
