// The rank's CUDA device, for every thread. CUDA's current device is per thread: a thread that
// touches CUDA without binding first works on device 0, which opens a context there on every rank of
// a node (memory on GPU 0 for each rank, and work on the wrong GPU). So main records the rank's device
// once it is chosen, and each thread that may touch CUDA (main, the watchdog, the data loader, the
// checkpoint writer) calls bind_rank_device() first. Without CUDA, or on a CPU rank, both do nothing.
#pragma once

namespace mnddp {

// The rank's CUDA device index; -1 (the default) for a CPU rank.
void set_rank_device(int cuda_index);
int rank_device();

// Makes the rank's device current on the calling thread (cudaSetDevice), if the rank has one.
void bind_rank_device();

}  // namespace mnddp
