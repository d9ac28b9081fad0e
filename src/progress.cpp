// The training loop's heartbeat.
#include "mnddp/progress.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mnddp::progress {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<std::int64_t> g_last_ns{Clock::now().time_since_epoch().count()};
std::atomic<int> g_watched{0};

}  // namespace

void note() { g_last_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

double seconds_idle() {
  const Clock::time_point last{Clock::duration(g_last_ns.load(std::memory_order_relaxed))};
  return std::chrono::duration<double>(Clock::now() - last).count();
}

bool watched() { return g_watched.load() > 0; }

Watched::Watched() {
  note();
  g_watched.fetch_add(1);
}

Watched::~Watched() { g_watched.fetch_sub(1); }

}  // namespace mnddp::progress
