// Preemption signals (Slurm's --signal, scancel --signal, SIGTERM at the time limit): the handler
// only sets a flag; the trainer all-reduces it (MAX) at a step boundary, so every rank checkpoints
// at the same step and exits with kExitPreempted.
#pragma once

#include <string>
#include <vector>

namespace mnddp {

// Parses "USR2,TERM" (names with or without SIG, or numbers). Throws UsageError naming
// --preempt-signals and the bad entry.
std::vector<int> parse_signal_list(const std::string& spec);
// The inverse: "USR2,TERM" (a signal without a name here as its number).
std::string format_signal_list(const std::vector<int>& signals);

// Installs the flag-setting handler for these signals (SA_RESTART, async-signal-safe).
void install_preemption_handlers(const std::vector<int>& signals);

// First thing in main, before MPI starts: catch the default signals (TrainingConfig's) already, so a
// warning that arrives while the job is still starting (a requeued job is often warned at once)
// sets the flag instead of killing the rank. Settled once the config is known:
void hold_preemption_signals(const std::vector<int>& signals);
// `wanted`: the signals this run checkpoints on (empty without --checkpoint-dir). Every held signal
// not wanted goes back to its default action, and one of them that already arrived is re-raised,
// so it has the effect it would have had.
void settle_preemption_signals(const std::vector<int>& wanted);
// Also called, from the handler, with every preemption signal that arrives (incident_signals.hpp):
// must be async-signal-safe.
void set_preemption_notifier(void (*notify)(int signal));
bool preemption_requested();
int preemption_signal();  // the signal that arrived (0 if none)

}  // namespace mnddp
