// Health checks of communicators (NCCL's asynchronous errors): registered by whoever builds a
// communicator that can fail on its own, run by the watchdog thread on every tick. Kept in comm/ so
// that communicators need not know the watchdog, which sits above them.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace mnddp {

// Returns a message when the checked thing is broken; the watchdog then ends the job with it.
using HealthCheck = std::function<std::optional<std::string>()>;

// Returns an id for remove_health_check.
int add_health_check(HealthCheck check);
// Once this returns, the check is not running and never runs again: what it looks at may be freed.
void remove_health_check(int id);
// Runs every check (watchdog thread); the first message found, if any.
std::optional<std::string> run_health_checks();

}  // namespace mnddp
