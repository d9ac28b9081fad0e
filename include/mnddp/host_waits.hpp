// Host waits on the GPU: each time a thread of this process blocks until its device has finished
// queued work. A training step on a GPU should have none but where a log interval reads the loss
// (F1/F5 of the GPU review); the trainer counts them per step and reports the figure.
//  - mnddp's own waits call note_host_wait(): NCCL work waited for on the host, a host backend (MPI)
//    waiting for a device stream's copies.
//  - Every blocking CUDA runtime call of any library (torch's .item() and copies to the host,
//    stream, event and device synchronisations) is counted too where the process runs with
//    libmnddp_host_waits.so preloaded (bench/host_wait_counter.c: the GPU benchmark and device check).
#pragma once

#include <cstdint>

namespace mnddp {

void note_host_wait();
// Both kinds so far (the interposed count only where the library is preloaded).
std::uint64_t host_waits();
// Whether the interposer is loaded, so that host_waits() includes torch's own synchronisations.
bool host_waits_interposed();

}  // namespace mnddp
