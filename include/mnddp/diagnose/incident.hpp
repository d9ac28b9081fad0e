// The incident file: when a job fails (a fatal error, a watchdog timeout, a crash, a desync, a kill
// by the launcher while waiting for a dead peer), every rank that can still act appends one JSON
// line to one job-wide file (--incident-file): its last collectives per channel (the trackers' ring
// buffers), its step, what each of its threads was doing and for how long (activity.hpp), the native
// stack of every thread (thread_stacks.hpp), host, device and PID, and what it saw of the other ranks
// (the watchdog's questions: a rank that never answered still appears). The rank that sets the
// incident off asks the others to write theirs over the watchdog's channel before it ends the job.
// `mnddp incident FILE` turns the lines into one verdict (incident_verdict.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/diagnose/thread_stacks.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

// Why this rank writes its record.
enum class IncidentCause {
  Fatal,    // an error on this rank alone (abort_all)
  Crash,    // a fatal signal on this rank (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
  Timeout,  // this rank's watchdog found a collective open past --collective-timeout
  Error,    // an error every rank agreed on (a desync, replicas that differ, NaN with abort)
  Signal,   // a termination signal (the launcher ending the job) while it waited in a collective
  Request,  // another rank asked (its incident), while this one could still answer
};
std::string_view incident_cause_name(IncidentCause cause);

// What this rank learned from another about the stuck call (the watchdog's question and answer).
struct PeerView {
  int rank = 0;
  bool answered = false;
  std::string state;          // "behind" (never reached the call), "inside", "ahead", "silent"
  std::int64_t started = 0;   // calls it had begun on the channel
  std::int64_t finished = 0;  // and finished
  double idle_s = 0.0;        // since its last call there began or ended
  std::string where;          // its own line on every channel
};

struct StuckCall {
  std::string channel;
  std::uint64_t seq = 0;
  std::string what;  // "allreduce #812 (4.0 MB, gradient bucket 0)"
  double age_s = 0.0;
};

struct IncidentReport {
  IncidentCause cause = IncidentCause::Fatal;
  std::string reason;  // the message the job ends with
  int exit_code = 1;
  int origin = -1;  // the rank that set the incident off (-1: this one)
  std::optional<StuckCall> stuck;
  std::vector<PeerView> peers;
  // A crash: the faulting thread's stack, as its signal handler saw it.
  long crash_tid = 0;
  std::vector<StackFrame> crash_frames;
};

class IncidentRecorder {
 public:
  // Once the run's config is agreed. `path`: the job-wide file ("" turns incident files off);
  // `run_id`: equal on every rank (the file may hold earlier runs' incidents too).
  static void configure(const RankInfo& rank, std::string path, std::string run_id);
  static void set_device(std::string device);
  static bool enabled();
  static const std::string& path();
  static std::string identity();  // "rank 3@nodeA"
  // "incident records in 'incident.jsonl' (explain them: mnddp incident incident.jsonl)": the line
  // that points the user at the file once this rank has written.
  static std::string pointer();

  // Appends this rank's record: once per process (false when already written, or off). Takes the
  // stacks (at most `stack_wait`) and a lock on the file; safe from any thread but a signal handler.
  static bool write(const IncidentReport& report,
                    std::chrono::milliseconds stack_wait = std::chrono::milliseconds(200));
  static bool written();
  // The run went on after a `signal` record (a SIGTERM that was a preemption, while this rank waited
  // in a slow collective): appends a line withdrawing it, and lets a later failure write again.
  static void withdraw_signal_record();

  // How this rank asks the others to write theirs: the watchdog installs it (its channel answers even
  // while a rank's main thread is stuck). Returns once they have, or after its bounded wait; asks
  // once per process, a later call returns at once.
  using PeerRequest = std::function<void(const std::string& reason, int exit_code)>;
  static void set_peer_request(PeerRequest request);
  static void ask_peers(const std::string& reason, int exit_code);

  // The record as JSON text (one line, no newline): for the tests.
  static std::string record_json(const IncidentReport& report, const std::vector<ThreadStack>& stacks);
};

// The run's id for the incident file: "<UTC time>-<Slurm job id or launcher pid>", made on rank 0.
std::string make_run_id();

}  // namespace mnddp
