// The host-wait counter: mnddp's own count, plus the preloaded interposer's when it is there.
#include "mnddp/host_waits.hpp"

#include <dlfcn.h>

#include <atomic>

namespace mnddp {
namespace {

std::atomic<std::uint64_t> g_own{0};

using InterposedCount = std::uint64_t (*)();

// The interposer's counter, looked up once: a symbol of the preloaded library, or none.
InterposedCount interposed() {
  static const InterposedCount count =
      reinterpret_cast<InterposedCount>(dlsym(RTLD_DEFAULT, "mnddp_interposed_host_waits"));
  return count;
}

}  // namespace

void note_host_wait() { g_own.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t host_waits() {
  const InterposedCount count = interposed();
  return g_own.load(std::memory_order_relaxed) + (count != nullptr ? count() : 0);
}

bool host_waits_interposed() { return interposed() != nullptr; }

}  // namespace mnddp
