// LibTorch's CUDA half, loaded at run time. mnddp links only LibTorch's CPU half: libtorch_cuda.so
// brings cuBLAS(Lt), cuSPARSE(Lt), cuFFT, nvJitLink and more, whose pages and static data cost every
// rank ~230 MB of resident memory (and their load time), GPU or not. select_device() loads it for
// --device cuda, and for --device auto where a CUDA driver (libcuda.so.1) exists; --device cpu never.
#pragma once

#include <string>

#include "mnddp/choices.hpp"

namespace mnddp {

struct TorchCuda {
  bool loaded = false;
  std::string detail;  // what was loaded, or why not (for the log)
  // --device auto found a CUDA driver but could not load the CUDA half: the run falls back to the
  // CPU where the user most likely expected a GPU, which select_device() says at warn level.
  bool driver_without_torch_cuda = false;
};

// Loads it where `requested` may use a GPU (once loaded, it stays). It must come before anything
// asks ATen about CUDA: ATen settles once, at its first CUDA query, whether CUDA exists. Throws
// UsageError when --device cuda cannot load it.
TorchCuda load_torch_cuda(DeviceRequest requested);

}  // namespace mnddp
