// mnddp preflight: run under mpirun/srun before training (same launch, same options), it checks in
// seconds what would otherwise fail or crawl an hour into the job: every rank's device (a small sum
// on it), the data files (each rank opens and validates a share of the shards), the checkpoint
// directory (writable, room for two of its newest checkpoint), and the links between ranks over the
// training backend (diagnose/link_test.hpp). It prints a table and a verdict, and on a failure exits
// with kExitPreflight and the hosts to leave out as Slurm's --exclude= text.
#pragma once

#include <string>
#include <vector>

#include "mnddp/runtime.hpp"

namespace mnddp {

class Watchdog;

// Options of its own (--link-mb, --slow-below, --inject-slow-rank), then any `mnddp train` option.
int preflight_command(Runtime& runtime, Watchdog& watchdog, std::vector<std::string> args);

// `mnddp preflight --help`'s text: printed before MPI starts (a login node, help2man).
const char* preflight_usage();

}  // namespace mnddp
