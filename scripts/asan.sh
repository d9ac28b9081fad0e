#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer together (one instrumented
# build, build-asan, as LLVM's and Chromium's ASan+UBSan builds): everything but the Slurm, GPU,
# style and device tests (the device bundle packs this build's binaries: instrumented, they are over
# the size a device call carries). Slow (an instrumented build of the torch code takes a while on 2 cores), so it is a
# separate job; CI runs a short subset (scripts/sanitizers_ci.sh).
# Usage: scripts/asan.sh [ctest arguments, e.g. -R reducer]: with arguments, only what the selected
# tests need is built.
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
export MNDDP_BUILD_DIR="${MNDDP_ASAN_BUILD_DIR:-$MNDDP_ROOT/build-asan}"
export MNDDP_CMAKE_ARGS="-DMNDDP_SANITIZE=address,undefined ${MNDDP_CMAKE_ARGS:-}"
mnddp_build_tests -LE "slurm|gpu|style|device" "$@"
mnddp_mpi_env
# Leaks: Open MPI, PMIx and HDF5 keep process-lifetime allocations (tests/asan/lsan.supp names
# each); ours and torch's must be clean, but for one test file the suppressions name. Errors abort
# the process, so a finding is a failing test, not a log line. Allocation stacks must be complete for a frame to match (the
# libraries have no frame pointers: slow unwinding), and Open MPI's and PMIx's plugins must stay
# loaded until the leak check. A SIGSEGV goes to mnddp's own handler (allow_user_segv_handler): its
# record and message are what the crash tests check; ASan's handler would end the process first.
# intercept_tls_get_addr=0: GCC 12's (and LLVM 16's) __tls_get_addr interceptor takes a dynamic TLS
# block at offset 16 of a page for one with a pre-2.25 glibc header and reads two words before it as
# its range; LeakSanitizer's tracer then scans that range and dies at exit ("Tracer caught signal
# 11", the same address every run: the 3-rank test_data_mpi and test_checkpoint_file, whose Open MPI
# threads' TLS land there). Without it, dynamic TLS is not a root: a pointer held only there would be
# reported as a leak, never hidden.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:halt_on_error=1:detect_odr_violation=0:fast_unwind_on_malloc=0:allow_user_segv_handler=1:intercept_tls_get_addr=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
# The end-to-end tests' deadlines (a hang check) stretch: an instrumented run starts ~5x slower.
export MNDDP_TEST_TIME_SCALE="${MNDDP_TEST_TIME_SCALE:-4}"
export LSAN_OPTIONS="suppressions=$MNDDP_ROOT/tests/asan/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure --no-tests=error -j "$(nproc)" --timeout 1200 -LE "slurm|gpu|style|device" "$@"
