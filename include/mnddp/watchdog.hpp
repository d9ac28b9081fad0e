// The watchdog: turns a hang into a fast, explained exit. A thread of its own looks at every
// collective in flight (collective_tracker.hpp); when one has been open longer than
// --collective-timeout it asks every other rank where it is, over a communicator used for nothing
// else with nonblocking calls and a bounded wait, prints what it learned (which ranks never reached
// the stuck call, which are in it too, which did not answer), and ends the job through abort_all
// (ncclCommAbort, then MPI_Abort) with exit code kExitHang. Every rank's watchdog also answers such
// questions, even while its main thread is stuck. Health checks (comm/health_checks.hpp: NCCL's
// asynchronous errors) run on the same tick.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "mnddp/exit_codes.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

class Watchdog {
 public:
  // Collective over MPI_COMM_WORLD (duplicates it). timeout_s <= 0 turns the timeout off; the
  // watchdog then still answers other ranks and runs the health checks.
  Watchdog(const RankInfo& rank, double timeout_s);
  ~Watchdog();  // stops and joins the thread; local
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_timeout(double seconds);

  // A safety net for the way out: if the process has not ended `seconds` from now (a finalize or a
  // destructor waiting on a rank that is gone), it prints why and exits with `exit_code`.
  static void arm_exit_deadline(double seconds, int exit_code);

 private:
  void run();
  void serve_requests();
  // Asks every other rank's watchdog to write its incident record; waits (bounded) for them.
  void ask_for_incident_records(const std::string& reason, int exit_code);
  [[noreturn]] void diagnose_and_abort(const std::string& channel, std::uint64_t seq, const std::string& what,
                                       double age);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mnddp
