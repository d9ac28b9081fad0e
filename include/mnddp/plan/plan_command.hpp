// mnddp plan: launched like `mnddp train` with the same options, on one rank (one GPU, or one CPU
// process), it trains a few steps of the real model and batch, measures the step's phases, each
// gradient's ready time and the peak memory, and predicts from them (plan/scaling_plan.hpp) the
// step, throughput, scaling efficiency and memory at 1 to --max-nodes nodes of --gpus-per-node,
// on a measured (--network FILE) or reference network, with its advice. Text on stdout, --json,
// --plot. Its measuring half lives in src/train/plan_command.cpp (it runs the trainer).
#pragma once

#include <string>
#include <vector>

#include "mnddp/runtime.hpp"

namespace mnddp {

class Watchdog;

int plan_command(Runtime& runtime, Watchdog& watchdog, std::vector<std::string> args);

// `mnddp plan --help`'s text: printed before MPI starts (a login node, help2man).
const char* plan_usage();

}  // namespace mnddp
