// The watchdog: turns a hang into a fast, explained exit. A thread of its own looks at every
// collective in flight (collective_tracker.hpp); when one has been open longer than
// --collective-timeout it asks every other rank where it is, over a communicator used for nothing
// else with nonblocking calls and a bounded wait, prints what it learned (which ranks never reached
// the stuck call, which are in it too, which did not answer), and ends the job through abort_all
// (ncclCommAbort, then MPI_Abort) with exit code kExitHang. Every rank's watchdog also answers such
// questions, even while its main thread is stuck. The thread that decides never calls CUDA or NCCL:
// a stuck collective can hold CUDA's locks, and a thread blocked on them could neither time out nor
// abort (PyTorch learned it: pytorch#97066, #110449). A second thread, the device prober, does what
// needs the device on the same tick: NCCL's asynchronous errors (comm/health_checks.hpp) and the
// CUDA event queries that close finished device collectives. If it blocks, their records stay open
// and the deciding thread times them out. While the training loop runs, the deciding thread also
// ends a rank where nothing has moved for longer than the timeout with no collective open
// (progress.hpp): a hang outside communication that no other rank could report.
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

  // Runtime::arm_exit_deadline.
  static void arm_exit_deadline(double seconds, int exit_code) { Runtime::arm_exit_deadline(seconds, exit_code); }

 private:
  void run();
  // The device prober's loop: binds the rank's device, runs the health checks (NCCL's asynchronous
  // errors) and closes the records of device collectives that have finished (CUDA event queries).
  void probe_devices();
  void serve_requests();
  // Asks every other rank's watchdog to write its incident record; waits (bounded) for them.
  void ask_for_incident_records(const std::string& reason, int exit_code);
  // Nothing moved for longer than the timeout while the loop runs, and no collective is open.
  [[noreturn]] void no_progress_abort(double idle);
  [[noreturn]] void diagnose_and_abort(const std::string& channel, std::uint64_t seq, const std::string& what,
                                       double age);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mnddp
