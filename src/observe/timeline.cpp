// The process's timeline: one buffer behind one lock (a recording thread holds it for a push_back;
// the loop records a few events per step), drained by the trace observer.
#include "mnddp/observe/timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>

#include "mnddp/diagnose/activity.hpp"

namespace mnddp::timeline {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

struct Buffer {
  std::mutex mutex;
  std::vector<Event> events;
  std::vector<std::string> threads;
  std::uint64_t next_id = 0;
};

// Never destroyed: threads may record while static destructors run.
Buffer& buffer() {
  static auto* b = new Buffer;
  return *b;
}

thread_local int t_thread = -1;

int this_thread(Buffer& b) {  // caller holds b.mutex
  if (t_thread < 0) {
    t_thread = static_cast<int>(b.threads.size());
    b.threads.push_back(fmt::format("thread {}", t_thread));
  }
  return t_thread;
}

void record(Event::Kind kind, std::string_view category, std::string name, Clock::time_point begin,
            Clock::time_point end, std::string args) {
  if (!enabled()) return;
  Buffer& b = buffer();
  std::lock_guard lock(b.mutex);
  Event& e = b.events.emplace_back();
  e.kind = kind;
  e.category = category;
  e.name = std::move(name);
  e.begin = begin;
  e.end = end;
  e.thread = this_thread(b);
  if (kind == Event::Kind::Async) e.id = ++b.next_id;
  e.args = std::move(args);
}

}  // namespace

void enable(bool on) { detail::g_enabled.store(on); }

void span(std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
          std::string args) {
  record(Event::Kind::Span, category, std::move(name), begin, end, std::move(args));
}

void async_span(std::string_view category, std::string name, Clock::time_point begin, Clock::time_point end,
                std::string args) {
  record(Event::Kind::Async, category, std::move(name), begin, end, std::move(args));
}

void name_this_thread(std::string name, bool shared) {
  Activity::name_thread(name);  // the incident file names threads the same way
  Buffer& b = buffer();
  std::lock_guard lock(b.mutex);
  if (shared && t_thread < 0) {
    const auto known = std::find(b.threads.begin(), b.threads.end(), name);
    if (known != b.threads.end()) {
      t_thread = static_cast<int>(known - b.threads.begin());
      return;
    }
  }
  b.threads[static_cast<std::size_t>(this_thread(b))] = std::move(name);
}

std::vector<Event> drain() {
  Buffer& b = buffer();
  std::lock_guard lock(b.mutex);
  std::vector<Event> out;
  out.swap(b.events);
  return out;
}

std::vector<std::string> thread_names() {
  Buffer& b = buffer();
  std::lock_guard lock(b.mutex);
  return b.threads;
}

std::string json_string(std::string_view text) {
  const bool plain = std::none_of(text.begin(), text.end(), [](char c) {
    return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80;
  });
  if (!plain) return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string quoted;
  quoted.reserve(text.size() + 2);
  quoted += '"';
  quoted += text;
  quoted += '"';
  return quoted;
}

ScopedSpan::ScopedSpan(std::string_view category, std::string name)
    : on_(enabled()), category_(category), name_(on_ ? std::move(name) : std::string()) {
  if (on_) begin_ = Clock::now();
}

ScopedSpan::~ScopedSpan() {
  if (on_) span(category_, std::move(name_), begin_, Clock::now());
}

}  // namespace mnddp::timeline
