// Preemption signals (Slurm's --signal, scancel --signal, SIGTERM at the time limit): the handler
// only sets a flag; the trainer all-reduces it (MAX) at a step boundary, so every rank checkpoints
// at the same step and exits with kExitPreempted.
#pragma once

#include <string>
#include <vector>

namespace mnddp {

// Exit code of a run that checkpointed because of a preemption signal (docs/ERRORS.md).
inline constexpr int kExitPreempted = 3;

// Parses "USR2,TERM" (names with or without SIG, or numbers). Throws UsageError naming
// --preempt-signals and the bad entry.
std::vector<int> parse_signal_list(const std::string& spec);

// Installs the flag-setting handler for these signals (SA_RESTART, async-signal-safe).
void install_preemption_handlers(const std::vector<int>& signals);
bool preemption_requested();
int preemption_signal();  // the signal that arrived (0 if none)

}  // namespace mnddp
