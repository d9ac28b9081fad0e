// Young's and Daly's interval, from the run's own checkpoint costs.
#include "mnddp/observe/checkpoint_advice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mnddp {
namespace {

std::string span(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

std::string line(const char* name, const CheckpointCosts::Level& level, const IntervalAdvice& advice,
                 std::int64_t used) {
  return fmt::format("{} {:.3f} s blocked each ({} taken): every {} (about {} steps{}){}", name, advice.cost_s,
                     level.count, span(advice.seconds), advice.steps,
                     used > 0 ? fmt::format("; this run: every {}", used) : std::string(),
                     advice.commit_bound ? ", no sooner than the writer's commit" : "");
}

}  // namespace

IntervalAdvice advise_interval(const CheckpointCosts::Level& level, double mtbf_hours, double step_s) {
  IntervalAdvice advice;
  if (level.count <= 0 || mtbf_hours <= 0) return advice;
  advice.cost_s = level.blocked_s / level.count;
  const double young = std::sqrt(2.0 * advice.cost_s * mtbf_hours * 3600.0);
  const double commit = level.commits > 0 ? level.commit_s / level.commits : 0.0;
  advice.commit_bound = commit > young;
  advice.seconds = std::max(young, commit);
  advice.steps = step_s > 0 ? std::max<std::int64_t>(1, std::llround(advice.seconds / step_s)) : 1;
  return advice;
}

std::string checkpoint_advice_text(const CheckpointCosts& costs, double mtbf_hours, double step_s,
                                   std::int64_t local_interval, std::int64_t file_system_interval) {
  std::string parts;
  const auto add = [&](const std::string& part) { parts += (parts.empty() ? "" : "; ") + part; };
  if (costs.local.count > 0)
    add(line("node-local", costs.local, advise_interval(costs.local, mtbf_hours, step_s), local_interval));
  if (costs.file_system.count > 0)
    add(line("file system", costs.file_system, advise_interval(costs.file_system, mtbf_hours, step_s),
             file_system_interval));
  if (parts.empty()) return {};
  return fmt::format("sqrt(2 x cost x MTBF) with --mtbf {:g} h: {}", mtbf_hours, parts);
}

}  // namespace mnddp
