// Signals that end a rank, turned into incident records (incident.hpp):
//  - a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): the faulting thread's handler dumps its
//    own stack and waits (bounded) while a thread of ours writes the record and asks the other ranks
//    for theirs; then the signal takes its course (MPI's own handler, if it had one, then death);
//  - a termination signal (the launcher ending the job because a peer died: mpirun sends SIGTERM, then
//    SIGKILL a second later) while this rank waits in a collective that has been open for a while:
//    the record says where it waited. A preemption signal keeps its meaning (preemption.hpp); an
//    uncaught SIGTERM still terminates, a fraction of a second later.
#pragma once

namespace mnddp {

// After IncidentRecorder::configure and settle_preemption_signals. Once per process.
void install_incident_signals();

}  // namespace mnddp
