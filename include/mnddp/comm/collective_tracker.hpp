// What the watchdog knows about collectives: every channel (the MPI control communicator, the MPI
// gradient channel, NCCL) records each collective it issues (op, sequence number, bytes, label,
// start time) and when it ends. A stuck collective is then a record that stays open; the watchdog
// (watchdog.hpp) reads the trackers from its own thread. Recording costs one uncontended lock.
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
  explicit CollectiveTracker(std::string channel);  // listed for the watchdog while it lives
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
  };
  Snapshot snapshot() const;
  const std::string& channel() const { return channel_; }

  // Every live tracker's snapshot (all channels of this process), and a poll of every tracker.
  static std::vector<Snapshot> snapshot_all();
  static void poll_all();

 private:
  std::string channel_;
  mutable std::mutex mutex_;
  std::uint64_t started_ = 0;
  std::uint64_t finished_ = 0;
  std::map<std::uint64_t, CollectiveRecord> open_;
  std::optional<CollectiveRecord> last_;
  std::chrono::steady_clock::time_point changed_;
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
