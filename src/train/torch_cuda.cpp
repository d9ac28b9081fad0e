// Loading LibTorch's CUDA half on demand (dlopen), and checking that ATen took it.
#include "mnddp/train/torch_cuda.hpp"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <mutex>
#include <optional>
#include <string>

#include "mnddp/build_config.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::string last_dl_error() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown error";
}

TorchCuda decide(DeviceRequest requested) {
  if (requested == DeviceRequest::Cpu) return {false, "not loaded (--device cpu)"};
  if (!MNDDP_HAVE_CUDA) return {false, "not built (a CPU-only LibTorch, or no CUDA toolkit)"};
  if (requested == DeviceRequest::Auto) {
    // No driver, no GPU: a CPU node need not map a gigabyte of CUDA libraries to find that out. The
    // handle stays open (the CUDA runtime opens the same library).
    if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr)
      return {false, fmt::format("not loaded (--device auto, no CUDA driver: {})", last_dl_error())};
  }
  // By soname first (the executable's run path: wherever its LibTorch is), then where CMake found it.
  // RTLD_GLOBAL: as torch's own Python loader does, for libraries loaded later (cuDNN's parts).
  void* handle = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL);
  std::string error = handle == nullptr ? last_dl_error() : "";
  if (handle == nullptr && build::kTorchCudaLibrary[0] != '\0') {
    handle = dlopen(build::kTorchCudaLibrary, RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) error = last_dl_error();
  }
  if (handle == nullptr) {
    if (requested == DeviceRequest::Cuda)
      throw UsageError(fmt::format("--device cuda: cannot load LibTorch's CUDA library: {}", error));
    return {false, fmt::format("not loaded (--device auto: {})", error), /*driver_without_torch_cuda=*/true};
  }
  // Loading registered ATen's CUDA hooks, unless some code asked ATen about CUDA before: then ATen
  // has settled on "no CUDA" for the life of the process. A bug of ours, not the user's.
  if (!at::detail::getCUDAHooks().isBuilt())
    throw Error("internal: ATen was asked about CUDA before libtorch_cuda.so was loaded; CUDA stays unusable");
  link_map* map = nullptr;
  const std::string where = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : "";
  return {true, fmt::format("loaded ({})", where)};
}

}  // namespace

TorchCuda load_torch_cuda(DeviceRequest requested) {
  static std::mutex mutex;
  static std::optional<TorchCuda> loaded;  // once loaded, always loaded
  std::lock_guard lock(mutex);
  if (loaded) return *loaded;
  TorchCuda result = decide(requested);
  if (result.loaded) loaded = result;
  return result;
}

}  // namespace mnddp
