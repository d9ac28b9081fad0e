// The health-check registry. Checks run under the registry's lock, so removing one waits for a
// pass in progress: a communicator can remove its check and then free itself safely.
#include "mnddp/comm/health_checks.hpp"

#include <map>
#include <mutex>

namespace mnddp {
namespace {

std::mutex g_mutex;
std::map<int, HealthCheck> g_checks;
int g_next_id = 0;

}  // namespace

int add_health_check(HealthCheck check) {
  std::lock_guard lock(g_mutex);
  g_checks.emplace(++g_next_id, std::move(check));
  return g_next_id;
}

void remove_health_check(int id) {
  std::lock_guard lock(g_mutex);
  g_checks.erase(id);
}

std::optional<std::string> run_health_checks() {
  std::lock_guard lock(g_mutex);
  for (const auto& [id, check] : g_checks)
    if (auto problem = check()) return problem;
  return std::nullopt;
}

}  // namespace mnddp
