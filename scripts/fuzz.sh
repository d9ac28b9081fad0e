#!/usr/bin/env bash
# The fuzz harnesses under libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, in a clang
# build tree of its own (build-fuzz): only the torch-free library and the harnesses are built.
# Usage: scripts/fuzz.sh [SECONDS] [ctest arguments]: each harness fuzzes SECONDS (default 20) from
# its seed corpus (tests/fuzz/corpus/NAME); new inputs collect in build-fuzz/tests/fuzz-found/NAME.
# A finding fails the test and leaves crash-*/leak-*/timeout-*/oom-* in the build tree's tests/.
set -euo pipefail
source "$(dirname "$0")/common.sh"

seconds=${1:-20}
[ $# -gt 0 ] && shift
bash "$MNDDP_ROOT/scripts/setup.sh"
# Clang 16 or later: std::source_location with GCC 12's library needs it (Debian's clang is 14).
if ! command -v clang++-16 >/dev/null || [ ! -d /usr/lib/llvm-16/lib/clang/16/lib/linux ]; then
  say "installing clang 16 and its libFuzzer"
  apt-get install -y -qq clang-16 libclang-rt-16-dev >/dev/null
fi
export MNDDP_BUILD_DIR="${MNDDP_FUZZ_BUILD_DIR:-$MNDDP_ROOT/build-fuzz}"
export CC=clang-16 CXX=clang++-16
export MNDDP_CMAKE_ARGS="-DMNDDP_FUZZ=ON -DMNDDP_SANITIZE=address,undefined -DMNDDP_FUZZ_SECONDS=$seconds \
-DMNDDP_USE_PCH=OFF ${MNDDP_CMAKE_ARGS:-}"
# The cache is keyed on the fuzz time too: a changed SECONDS reconfigures.
if [ -f "$MNDDP_BUILD_DIR/CMakeCache.txt" ] && ! grep -qx "MNDDP_FUZZ_SECONDS:STRING=$seconds" "$MNDDP_BUILD_DIR/CMakeCache.txt"; then
  cmake -S "$MNDDP_ROOT" -B "$MNDDP_BUILD_DIR" -DMNDDP_FUZZ_SECONDS="$seconds" >/dev/null
fi
mnddp_build fuzz_config fuzz_incident fuzz_checkpoint fuzz_shard
mnddp_mpi_env
# Undefined behaviour is a finding, not a warning; leaks in uninstrumented HDF5 and MPI are theirs.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$MNDDP_ROOT/tests/asan/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure --no-tests=error -L fuzz --timeout $((seconds + 300)) "$@"
