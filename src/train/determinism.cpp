// --deterministic: torch's switches and the libraries' environment variables.
#include "mnddp/train/determinism.hpp"

#include <ATen/Context.h>

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace mnddp {
namespace {

// MKL's mkl_cbwr_set(MKL_CBWR_AUTO | MKL_CBWR_STRICT), looked up at run time: the torch wheel links
// MKL statically and exports its service entry, a CPU-only or OpenBLAS build has none. MKL reads
// MKL_CBWR once, at its first call, which torch has made by now, so the variable alone is too late.
void set_mkl_strict_reproducibility() {
  constexpr int kMklCbwrAuto = 2, kMklCbwrStrict = 0x10000, kMklCbwrSuccess = 0;
  using CbwrSet = int (*)(int);
  const auto set = reinterpret_cast<CbwrSet>(::dlsym(RTLD_DEFAULT, "mkl_serv_cbwr_set"));
  if (set == nullptr) {
    spdlog::debug("--deterministic: no MKL in this torch (no mkl_serv_cbwr_set)");
    return;
  }
  const int status = set(kMklCbwrAuto | kMklCbwrStrict);
  if (status != kMklCbwrSuccess)
    spdlog::warn(
        "--deterministic: MKL refused strict reproducibility (status {}): CPU results may depend on "
        "--threads",
        status);
}

}  // namespace

void make_deterministic() {
  // Read by cuBLAS when it creates a handle and by MKL at its first call: before either happens.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  ::setenv("MKL_CBWR", "AUTO,STRICT", /*overwrite=*/0);
  set_mkl_strict_reproducibility();
  // oneDNN's CPU convolutions split their work by thread count; torch's own (im2col and an MKL
  // product, strict above) do not. Slower, but the result is the same on 1 thread or 64.
  at::globalContext().setUserEnabledMkldnn(false);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

}  // namespace mnddp
