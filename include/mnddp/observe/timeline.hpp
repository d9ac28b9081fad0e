// Timeline: what each thread of this process did, and when, for --trace. Off by default; while off,
// recording costs one relaxed atomic load. Any layer may record without knowing who reads: the
// loop's phases (through the trace observer), the communication channels (each collective from
// issue to completion, and its execution on the channel's thread), the checkpoint writer. The
// trace observer drains the events and writes them as Chrome-trace JSON. No torch, no MPI.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mnddp::timeline {

using Clock = std::chrono::steady_clock;

struct Event {
  enum class Kind : std::uint8_t {
    Span,   // one thread's work from begin to end (nested spans of a thread are contained)
    Async,  // something in flight from begin to end, overlapping others (a collective issued → done)
  };
  Kind kind = Kind::Span;
  std::string_view category;  // a string literal: "step", "eval", "checkpoint", "comm"
  std::string name;
  Clock::time_point begin;
  Clock::time_point end;
  int thread = 0;        // index into thread_names()
  std::uint64_t id = 0;  // Async: unique in the process
  std::string args;      // a JSON object's text ("" for none)
};

namespace detail {
extern std::atomic<bool> g_enabled;
}

// Starts (or stops) recording.
void enable(bool on);
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Records an event of the calling thread (ignored while off). `category` must be a string literal
// (it is kept as a view).
void span(std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
          std::string args = {});
void async_span(std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
                std::string args = {});

// Names the calling thread's track ("training", "gradients channel"). A thread that records
// without a name is "thread N". `shared`: a thread of a series that never overlap (one commit
// thread after another) joins the track of that name.
void name_this_thread(std::string name, bool shared = false);

// The events recorded since the last drain, oldest first; the buffer is empty afterwards.
std::vector<Event> drain();
// Track names, indexed by Event::thread.
std::vector<std::string> thread_names();

// `text` as a JSON string, quotes included (names and labels are plain text almost always: copied
// as they are; anything else is escaped by nlohmann::json).
std::string json_string(std::string_view text);

// A span of the calling thread from construction to destruction (nothing while off).
class ScopedSpan {
 public:
  ScopedSpan(std::string_view category, std::string name);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  bool on_;
  std::string_view category_;
  std::string name_;
  Clock::time_point begin_;
};

}  // namespace mnddp::timeline
