#!/usr/bin/env bash
# The test suite under UndefinedBehaviorSanitizer alone (build-ubsan), built with
# -fno-sanitize-recover: the first undefined operation ends the test. Everything but the Slurm, GPU,
# style and device tests (as scripts/asan.sh). Faster to run than scripts/asan.sh (no shadow memory), which checks the same
# undefined behaviour besides memory errors.
# Usage: scripts/ubsan.sh [ctest arguments, e.g. -R reducer]: with arguments, only what the selected
# tests need is built.
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
export MNDDP_BUILD_DIR="${MNDDP_UBSAN_BUILD_DIR:-$MNDDP_ROOT/build-ubsan}"
export MNDDP_CMAKE_ARGS="-DMNDDP_SANITIZE=undefined ${MNDDP_CMAKE_ARGS:-}"
mnddp_build_tests -LE "slurm|gpu|style|device" "$@"
mnddp_mpi_env
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export MNDDP_TEST_TIME_SCALE="${MNDDP_TEST_TIME_SCALE:-2}"
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure --no-tests=error -j "$(nproc)" --timeout 900 -LE "slurm|gpu|style|device" "$@"
