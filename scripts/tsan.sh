#!/usr/bin/env bash
# The torch-free library's tests (ctest label torch-free: unit and MPI tests of mnddp_base) under
# ThreadSanitizer, in a build tree of its own (build-tsan). The torch half is left out: its threads
# are libgomp's and torch's, uninstrumented, and would only report what TSan cannot see synchronised.
# Usage: scripts/tsan.sh [ctest arguments, e.g. -R comm]
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
export MNDDP_BUILD_DIR="${MNDDP_TSAN_BUILD_DIR:-$MNDDP_ROOT/build-tsan}"
# No CUDA (the driver's threads are uninstrumented), the system allocator (TSan replaces malloc).
export MNDDP_CMAKE_ARGS="-DMNDDP_SANITIZE=thread -DMNDDP_HOST_ALLOCATOR=system -DMNDDP_WITH_CUDA=OFF \
-DMNDDP_USE_PCH=OFF ${MNDDP_CMAKE_ARGS:-}"
mnddp_build_tests -L torch-free "$@"
mnddp_mpi_env
# Open MPI's memory hooks rewrite munmap and brk, which TSan intercepts too; its plugins stay loaded
# so that a suppression naming one still matches at the end.
export OMPI_MCA_memory=^patcher OMPI_MCA_mpi_leave_pinned=0 OMPI_MCA_mca_base_component_disable_dlclose=1 \
  PMIX_MCA_mca_base_component_disable_dlclose=1
# ignore_noninstrumented_modules: an access from a library we did not build (Open MPI's dozens of
# plugins, HDF5) is not ours to judge; the suppressions name the libraries besides.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 report_thread_leaks=0 report_signal_unsafe=1 \
die_after_fork=0 ignore_noninstrumented_modules=1 suppressions=$MNDDP_ROOT/tests/tsan/tsan.supp ${TSAN_OPTIONS:-}"
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure --no-tests=error -j "$(nproc)" --timeout 900 -L torch-free "$@"
