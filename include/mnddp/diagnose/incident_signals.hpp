// Signals that end a rank, turned into incident records (incident.hpp):
//  - a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): the faulting thread's handler dumps its
//    own stack and waits (bounded) while a thread of ours writes the record and asks the other ranks
//    for theirs; then the signal takes its course (MPI's own handler, if it had one, then death);
//  - a termination signal (the launcher ending the job because a peer died: mpirun sends SIGTERM, then
//    SIGKILL a second later) while this rank waits in a collective that has been open for a while:
//    the record says where it waited. A preemption signal keeps its meaning (preemption.hpp); an
//    uncaught SIGTERM still terminates, a fraction of a second later.
#pragma once

#include <cstddef>

namespace mnddp {

// After IncidentRecorder::configure and settle_preemption_signals. Once per process.
void install_incident_signals();

// This thread's alternate signal stack while the object lives (sigaltstack): the fatal-signal handler
// runs on it, so a thread whose own stack overflowed still writes its record. Every thread mnddp
// starts has one (guarded_thread); install_incident_signals gives the main thread its own.
class AlternateSignalStack {
 public:
  AlternateSignalStack();
  ~AlternateSignalStack();
  AlternateSignalStack(const AlternateSignalStack&) = delete;
  AlternateSignalStack& operator=(const AlternateSignalStack&) = delete;
  static constexpr std::size_t kBytes = 256 * 1024;  // the handler unwinds the stack: room for that

 private:
  void* memory_ = nullptr;
};

}  // namespace mnddp
