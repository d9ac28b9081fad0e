// The process exit codes of mnddp, in one place (docs/ERRORS.md explains each).
#pragma once

namespace mnddp {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    // internal or library failure (MPI, HDF5, CUDA, NCCL)
inline constexpr int kExitUsage = 2;      // bad input: option, file, dataset, environment
inline constexpr int kExitPreempted = 3;  // checkpointed after a preemption signal; resume to continue
inline constexpr int kExitHang = 4;       // a collective outlived --collective-timeout: the job was aborted
// The ranks fell out of step without hanging (yet): the consistency checks found differing collective
// sequences or parameters. The same code as a hang, which such a job otherwise becomes.
inline constexpr int kExitDesync = kExitHang;
// mnddp preflight found a device, a file, the checkpoint directory or a link not fit for training.
inline constexpr int kExitPreflight = 5;

}  // namespace mnddp
