// --deterministic: torch's switches and the libraries' environment variables.
#include "mnddp/train/determinism.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

// The CPU's vendor string from CPUID leaf 0 ("GenuineIntel", "AuthenticAMD"); empty off x86.
std::string cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return {};
  char vendor[12];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::string(vendor, sizeof(vendor));
#else
  return {};
#endif
}

}  // namespace

// MKL keeps strict reproducibility only on its Intel AVX2/AVX-512 code branches (oneMKL developer
// guide, "Reproducibility Conditions"). Measured on an AMD EPYC with AVX-512 in strict mode:
// sgemm(T, N, 27, 8, 64) with beta 1, a small convolution's weight gradient, differs between 1 and 3
// threads. On any other CPU, MKL runs on one thread on this thread, the one that trains and runs
// backward on the CPU (MKL's thread-local setting); torch's own kernels keep --threads.
void keep_matrix_products_thread_invariant() {
  const std::string vendor = cpu_vendor();
  if (vendor == "GenuineIntel") return;
  using SetLocal = int (*)(int);
  using GetMax = int (*)();
  const auto set_local = reinterpret_cast<SetLocal>(::dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
  const auto get_max = reinterpret_cast<GetMax>(::dlsym(RTLD_DEFAULT, "mkl_get_max_threads"));
  if (set_local == nullptr || get_max == nullptr) return;  // no MKL in this torch
  // Torch sets MKL's thread-local count itself (at::set_num_threads, and once per thread when its
  // first parallel kernel runs): run one such kernel first (a sum above the grain size), so that
  // nothing undoes the setting later; a second one checks that it holds.
  const auto parallel_kernel = [] { at::zeros({1 << 20}).sum().item<float>(); };
  parallel_kernel();
  set_local(1);
  parallel_kernel();
  if (get_max() != 1) {
    spdlog::warn(
        "--deterministic: MKL runs {} threads on this {} CPU, where its strict mode does not hold: CPU "
        "results may depend on --threads",
        get_max(), vendor);
    return;
  }
  spdlog::info(
      "--deterministic: MKL's strict reproducibility holds on Intel CPUs only; on this {} CPU its matrix "
      "products run on one thread so that --threads does not change the results",
      vendor.empty() ? "non-x86" : vendor);
}

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
