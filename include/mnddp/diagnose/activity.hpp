// What every thread of the process is doing now, for the incident file (diagnose/incident.hpp): a
// thread names its activity while it lasts ("forward", "reading shard train_017.h5"), and the
// incident writer, on another thread, reads every thread's innermost activity and how long it has
// lasted. The training loop's phases (observe/run_observer.hpp's PhaseTimer), validation,
// checkpoints and the data loader's reads name themselves; the current optimizer step is one more
// process-wide number. A scope costs one uncontended lock and a short copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mnddp {

class Activity {
 public:
  // The calling thread does `what` until this scope ends; scopes nest (the innermost is reported). An
  // exception that leaves the scope marks it, so the record of the error still says where it arose.
  explicit Activity(std::string_view what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

  // A name for the calling thread in incident files ("main", "data loader", "reducer").
  static void name_thread(std::string_view name);

  // The optimizer step the loop is working on (from 1; 0 before the first).
  static void set_step(std::int64_t step);
  static std::int64_t step();

  struct ThreadNow {
    long tid = 0;          // the kernel's thread id
    std::string name;      // from name_thread, else ""
    std::string what;      // the innermost activity, "" when none
    double seconds = 0.0;  // how long it has lasted
    std::string unwound;   // the innermost activity an exception left, "" when none did
  };
  // Every thread that ever named itself or an activity, and is still alive.
  static std::vector<ThreadNow> snapshot();

 private:
  char previous_[128];
  std::chrono::steady_clock::time_point previous_since_;
  int exceptions_;  // in flight when the scope began: more at its end means an error is leaving it
};

}  // namespace mnddp
