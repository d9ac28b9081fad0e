// What the watchdog knows about collectives: every channel (the MPI control communicator, the MPI
// gradient channel, NCCL) records each collective it issues (op, sequence number, bytes, label,
// start time) and when it ends. A stuck collective is then a record that stays open; the watchdog
// (watchdog.hpp) reads the trackers from its own thread. Each tracker also keeps, always on:
//  - a running hash of its call sequence (op, bytes, label): ranks in step have equal hashes, and the
//    consistency check (diagnose/consistency_check.hpp) compares them every log interval;
//  - its last kHistory calls in a ring buffer, for the incident file (diagnose/incident.hpp).
// Recording costs one uncontended lock and a few hundred bytes copied.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mnddp {

// Names the collectives this thread issues while it lives ("bucket 3", "checkpoint agreement"), so
// a timeout or a mismatch can say which part of the program was talking. Nests; thread-local.
class CollectiveLabel {
 public:
  explicit CollectiveLabel(std::string label);
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;
  static std::string current();  // "" when none

 private:
  std::string previous_;
};

// Whether a channel's calls follow the training loop's program order. Lockstep channels (the control
// plane, gradients, NCCL) are at the same call on every rank whenever the loop is; a Background
// channel (the asynchronous checkpoint writer's) runs beside the loop, so its progress at any given
// step differs between ranks and its hash is not compared at the log interval.
enum class ChannelPace { Lockstep, Background };

// One call as the ring buffer keeps it: fixed-size, so recording allocates nothing.
struct CollectiveHistoryEntry {
  std::uint64_t seq = 0;  // 0: an empty slot
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;  // the channel's running hash after this call
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point end;  // == start while the call is open
  bool open = true;
  char op[16] = {};
  char label[64] = {};  // cut short when longer
};

struct CollectiveRecord {
  std::uint64_t seq = 0;  // per channel, from 1, the same on every rank when the program is in step
  std::string op;
  std::size_t bytes = 0;
  std::string label;
  std::chrono::steady_clock::time_point start;
  std::function<bool()> finished;  // device collectives: polled by the watchdog; empty for host ones
};

class CollectiveTracker {
 public:
  static constexpr std::size_t kHistory = 64;  // calls kept per channel for the incident file

  // Listed for the watchdog while it lives.
  explicit CollectiveTracker(std::string channel, ChannelPace pace = ChannelPace::Lockstep);
  ~CollectiveTracker();
  CollectiveTracker(const CollectiveTracker&) = delete;
  CollectiveTracker& operator=(const CollectiveTracker&) = delete;

  // Opens a record and returns its sequence number; `label` defaults to the thread's CollectiveLabel.
  std::uint64_t begin(const std::string& op, std::size_t bytes, std::optional<std::string> label = std::nullopt,
                      std::function<bool()> finished = {});
  void end(std::uint64_t seq);
  // Ends the device collectives whose `finished` probe now says so (the watchdog's thread).
  void poll();

  struct Snapshot {
    std::string channel;
    std::uint64_t started = 0;
    std::uint64_t finished = 0;
    std::optional<CollectiveRecord> oldest_open;
    std::optional<CollectiveRecord> last;  // the most recently started
    double idle_s = 0.0;                   // since the last record opened or closed
    ChannelPace pace = ChannelPace::Lockstep;
    std::uint64_t hash = 0;                       // of every call started so far
    std::vector<CollectiveHistoryEntry> history;  // the last kHistory calls, oldest first
  };
  Snapshot snapshot(bool with_history = false) const;
  const std::string& channel() const { return channel_; }
  std::uint64_t hash() const;

  // Every live tracker's snapshot (all channels of this process), and a poll of every tracker (its
  // probes run outside the trackers' locks: a CUDA call may block).
  static std::vector<Snapshot> snapshot_all(bool with_history = false);
  static void poll_all();
  // One hash of every Lockstep channel's call sequence (by channel name, so the order trackers were
  // made in does not matter): equal on ranks that are in step.
  static std::uint64_t lockstep_hash();
  // When this process began its first call on a Lockstep channel since mark_first_call() (straggler
  // blame: the moment a rank is ready to meet the others in a step); nullopt when none since.
  static void mark_first_call();
  static std::optional<std::chrono::steady_clock::time_point> first_call_since_mark();

 private:
  std::string channel_;
  ChannelPace pace_;
  std::uint64_t id_;  // unique in the process, so poll_all never ends a record of a newer tracker
  mutable std::mutex mutex_;
  std::uint64_t started_ = 0;
  std::uint64_t finished_ = 0;
  std::map<std::uint64_t, CollectiveRecord> open_;
  std::optional<CollectiveRecord> last_;
  std::chrono::steady_clock::time_point changed_;
  std::uint64_t hash_;
  std::vector<CollectiveHistoryEntry> ring_;  // kHistory slots; call seq lives at seq % kHistory
};

// Ends a blocking collective's record however the call leaves (an exception included).
class CollectiveScope {
 public:
  CollectiveScope(CollectiveTracker& tracker, const std::string& op, std::size_t bytes)
      : tracker_(&tracker), seq_(tracker.begin(op, bytes)) {}
  ~CollectiveScope() {
    if (tracker_ != nullptr) tracker_->end(seq_);
  }
  CollectiveScope(CollectiveScope&& other) noexcept : tracker_(other.tracker_), seq_(other.seq_) {
    other.tracker_ = nullptr;
  }
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
  CollectiveScope& operator=(CollectiveScope&&) = delete;
  std::uint64_t seq() const { return seq_; }

 private:
  CollectiveTracker* tracker_;
  std::uint64_t seq_;
};

// "4.0 MB" / "12 B": sizes in diagnostics.
std::string human_bytes(std::size_t bytes);

}  // namespace mnddp
