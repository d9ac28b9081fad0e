// Per-thread activity slots, listed process-wide while their thread lives.
#include "mnddp/diagnose/activity.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

#include "mnddp/fixed_text.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

struct Slot {
  std::mutex mutex;
  long tid = 0;
  char name[32] = {};
  char what[128] = {};
  char unwound[128] = {};
  Clock::time_point since = Clock::now();
};

// Never destroyed: threads may end after static destruction began.
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<std::shared_ptr<Slot>>& registry() {
  static auto* slots = new std::vector<std::shared_ptr<Slot>>;
  return *slots;
}

// The calling thread's slot, listed on first use and unlisted when the thread ends.
struct Registration {
  std::shared_ptr<Slot> slot = std::make_shared<Slot>();
  Registration() {
    slot->tid = static_cast<long>(::syscall(SYS_gettid));
    std::lock_guard lock(registry_mutex());
    registry().push_back(slot);
  }
  ~Registration() {
    std::lock_guard lock(registry_mutex());
    std::erase(registry(), slot);
  }
};

Slot& my_slot() {
  thread_local Registration registration;
  return *registration.slot;
}

std::atomic<std::int64_t> g_step{0};

}  // namespace

Activity::Activity(std::string_view what) : exceptions_(std::uncaught_exceptions()) {
  Slot& slot = my_slot();
  std::lock_guard lock(slot.mutex);
  std::memcpy(previous_, slot.what, sizeof(previous_));
  previous_since_ = slot.since;
  if (previous_[0] == '\0') slot.unwound[0] = '\0';  // an outermost scope: an error handled before is history
  copy_cut(slot.what, what);
  slot.since = Clock::now();
}

Activity::~Activity() {
  Slot& slot = my_slot();
  std::lock_guard lock(slot.mutex);
  if (std::uncaught_exceptions() > exceptions_ && slot.unwound[0] == '\0')
    std::memcpy(slot.unwound, slot.what, sizeof(slot.unwound));
  std::memcpy(slot.what, previous_, sizeof(previous_));
  slot.since = previous_since_;
}

void Activity::name_thread(std::string_view name) {
  Slot& slot = my_slot();
  std::lock_guard lock(slot.mutex);
  copy_cut(slot.name, name);
}

void Activity::set_step(std::int64_t step) { g_step.store(step, std::memory_order_relaxed); }
std::int64_t Activity::step() { return g_step.load(std::memory_order_relaxed); }

std::vector<Activity::ThreadNow> Activity::snapshot() {
  std::vector<std::shared_ptr<Slot>> slots;
  {
    std::lock_guard lock(registry_mutex());
    slots = registry();
  }
  const auto now = Clock::now();
  std::vector<ThreadNow> threads;
  for (const auto& slot : slots) {
    std::lock_guard lock(slot->mutex);
    threads.push_back(
        {slot->tid, slot->name, slot->what, std::chrono::duration<double>(now - slot->since).count(), slot->unwound});
  }
  return threads;
}

}  // namespace mnddp
