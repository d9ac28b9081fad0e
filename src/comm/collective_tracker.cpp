// Collective records per channel, and the process-wide list the watchdog reads.
#include "mnddp/comm/collective_tracker.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "mnddp/fixed_text.hpp"
#include "mnddp/observe/timeline.hpp"
#include "mnddp/progress.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

thread_local std::string t_label;

// Nanoseconds of the steady clock at the first lockstep call since the mark; 0: none since.
std::atomic<std::int64_t> g_first_call_ns{0};

constexpr std::uint64_t kHashSeed = 0x6d6e646470ull;  // "mnddp"

std::atomic<std::uint64_t> g_next_tracker_id{1};

// The running hash extended by one call: what it is (op, bytes) and where the program issued it.
std::uint64_t extend_hash(std::uint64_t hash, const std::string& op, std::size_t bytes, const std::string& label) {
  const std::uint64_t size = bytes;
  hash = XXH3_64bits_withSeed(op.data(), op.size(), hash);
  hash = XXH3_64bits_withSeed(&size, sizeof(size), hash);
  return XXH3_64bits_withSeed(label.data(), label.size(), hash);
}

// The live trackers. Never destroyed (a tracker may outlive static destruction order).
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<CollectiveTracker*>& registry() {
  static auto* trackers = new std::vector<CollectiveTracker*>;
  return *trackers;
}

}  // namespace

CollectiveLabel::CollectiveLabel(std::string label) : previous_(std::move(t_label)) { t_label = std::move(label); }
CollectiveLabel::~CollectiveLabel() { t_label = std::move(previous_); }
std::string CollectiveLabel::current() { return t_label; }

CollectiveTracker::CollectiveTracker(std::string channel, ChannelPace pace)
    : channel_(std::move(channel)),
      pace_(pace),
      id_(g_next_tracker_id.fetch_add(1)),
      changed_(Clock::now()),
      hash_(kHashSeed),
      ring_(kHistory) {
  std::lock_guard lock(registry_mutex());
  registry().push_back(this);
}

CollectiveTracker::~CollectiveTracker() {
  std::lock_guard lock(registry_mutex());
  auto& all = registry();
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
}

std::uint64_t CollectiveTracker::begin(const std::string& op, std::size_t bytes, std::optional<std::string> label,
                                       std::function<bool()> finished) {
  CollectiveRecord record;
  record.op = op;
  record.bytes = bytes;
  record.label = label ? std::move(*label) : t_label;
  record.start = Clock::now();
  record.finished = std::move(finished);
  if (pace_ == ChannelPace::Lockstep && g_first_call_ns.load(std::memory_order_relaxed) == 0) {
    std::int64_t none = 0;
    g_first_call_ns.compare_exchange_strong(none, record.start.time_since_epoch().count());
  }
  progress::note();
  std::lock_guard lock(mutex_);
  record.seq = ++started_;
  changed_ = record.start;
  hash_ = extend_hash(hash_, record.op, record.bytes, record.label);
  CollectiveHistoryEntry& entry = ring_[record.seq % kHistory];
  entry.seq = record.seq;
  entry.bytes = record.bytes;
  entry.hash = hash_;
  entry.start = entry.end = record.start;
  entry.open = true;
  copy_cut(entry.op, record.op);
  copy_cut(entry.label, record.label);
  last_ = record;
  last_->finished = {};
  open_.emplace(record.seq, std::move(record));
  return started_;
}

void CollectiveTracker::end(std::uint64_t seq) {
  std::optional<CollectiveRecord> closed;  // kept for the timeline only
  Clock::time_point now;
  {
    std::lock_guard lock(mutex_);
    const auto open = open_.find(seq);
    if (open == open_.end()) return;
    progress::note();
    if (timeline::enabled()) closed = std::move(open->second);
    open_.erase(open);
    ++finished_;
    changed_ = now = Clock::now();
    CollectiveHistoryEntry& entry = ring_[seq % kHistory];
    if (entry.seq == seq) {
      entry.end = now;
      entry.open = false;
    }
  }
  if (!closed) return;
  // From issue to completion as this process saw it (a device collective: when a wait or the
  // watchdog's poll found it done).
  std::string args = fmt::format(R"({{"channel":{},"op":{},"seq":{},"bytes":{}}})", timeline::json_string(channel_),
                                 timeline::json_string(closed->op), closed->seq, closed->bytes);
  timeline::async_span("comm", closed->label.empty() ? closed->op : closed->label, closed->start, now, std::move(args));
}

void CollectiveTracker::poll() {
  std::vector<std::pair<std::uint64_t, std::function<bool()>>> probes;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [seq, record] : open_)
      if (record.finished) probes.emplace_back(seq, record.finished);
  }
  for (auto& [seq, probe] : probes)
    if (probe()) end(seq);
}

std::uint64_t CollectiveTracker::hash() const {
  std::lock_guard lock(mutex_);
  return hash_;
}

CollectiveTracker::Snapshot CollectiveTracker::snapshot(bool with_history) const {
  std::lock_guard lock(mutex_);
  Snapshot s;
  s.channel = channel_;
  s.pace = pace_;
  s.hash = hash_;
  if (with_history) {
    for (std::uint64_t seq = started_ >= kHistory ? started_ - kHistory + 1 : 1; seq <= started_; ++seq)
      if (ring_[seq % kHistory].seq == seq) s.history.push_back(ring_[seq % kHistory]);
  }
  s.started = started_;
  s.finished = finished_;
  if (!open_.empty()) {
    s.oldest_open = open_.begin()->second;
    s.oldest_open->finished = {};
  }
  s.last = last_;
  s.idle_s = std::chrono::duration<double>(Clock::now() - changed_).count();
  return s;
}

std::vector<CollectiveTracker::Snapshot> CollectiveTracker::snapshot_all(bool with_history) {
  std::lock_guard lock(registry_mutex());
  std::vector<Snapshot> all;
  for (const auto* tracker : registry()) all.push_back(tracker->snapshot(with_history));
  return all;
}

std::uint64_t CollectiveTracker::lockstep_hash() {
  std::vector<std::pair<std::string, std::uint64_t>> channels;
  {
    std::lock_guard lock(registry_mutex());
    for (const auto* tracker : registry())
      if (tracker->pace_ == ChannelPace::Lockstep) channels.emplace_back(tracker->channel_, tracker->hash());
  }
  std::sort(channels.begin(), channels.end());
  std::uint64_t hash = kHashSeed;
  for (const auto& [channel, channel_hash] : channels) {
    hash = XXH3_64bits_withSeed(channel.data(), channel.size(), hash);
    hash = XXH3_64bits_withSeed(&channel_hash, sizeof(channel_hash), hash);
  }
  return hash;
}

void CollectiveTracker::poll_all() {
  // The probes may block in CUDA: they run outside every lock, so that snapshot_all (the watchdog's
  // deciding thread) never waits behind one. A tracker is told its finished records only if it is
  // still registered by then, under the same id (not a new tracker at a reused address).
  struct Probe {
    CollectiveTracker* tracker;
    std::uint64_t id;
    std::uint64_t seq;
    std::function<bool()> finished;
  };
  std::vector<Probe> probes;
  {
    std::lock_guard registered(registry_mutex());
    for (auto* tracker : registry()) {
      std::lock_guard lock(tracker->mutex_);
      for (const auto& [seq, record] : tracker->open_)
        if (record.finished) probes.push_back({tracker, tracker->id_, seq, record.finished});
    }
  }
  std::vector<const Probe*> done;
  for (const auto& probe : probes)
    if (probe.finished()) done.push_back(&probe);
  if (done.empty()) return;
  std::lock_guard registered(registry_mutex());
  const auto& live = registry();
  for (const Probe* probe : done)
    if (std::find(live.begin(), live.end(), probe->tracker) != live.end() && probe->tracker->id_ == probe->id)
      probe->tracker->end(probe->seq);
}

void CollectiveTracker::mark_first_call() { g_first_call_ns.store(0); }

std::optional<std::chrono::steady_clock::time_point> CollectiveTracker::first_call_since_mark() {
  const std::int64_t ns = g_first_call_ns.load();
  if (ns == 0) return std::nullopt;
  return Clock::time_point(Clock::duration(ns));
}

std::string human_bytes(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KB", static_cast<double>(bytes) / 1024.0);
  return fmt::format("{:.1f} MB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace mnddp
