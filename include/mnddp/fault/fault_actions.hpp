// What the injected faults do that is not a one-liner: the announcement the tests look for, a full
// file system, a corrupt checkpoint. Where they strike is train/fault_hooks.hpp.
#pragma once

#include <string>

#include "mnddp/fault/fault_plan.hpp"

namespace mnddp {

// Prints "[rank R@host] mnddp: injected fault SPEC: WHAT" to stderr at once (the tests look for it).
void announce_fault(const FaultPlan& plan, const std::string& where, const std::string& what);

// stall: opens a call on a channel of its own ("injected-stall", the same call #1 on every rank that
// stalls) that never completes, and waits in it forever: to the watchdog, a network that stopped
// delivering. Never returns.
[[noreturn]] void stall_in_a_collective();

// checkpoint-fill: allocates nearly all free space of `directory`'s file system to `directory`/injected-fill.
void fill_file_system(const std::string& directory);

// checkpoint-corrupt: flips one byte in the data of the largest array of the checkpoint at `path`.
void corrupt_checkpoint(const std::string& path);

}  // namespace mnddp
