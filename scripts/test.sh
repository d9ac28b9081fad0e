#!/usr/bin/env bash
# The test command: install, build (with tests) and run the whole ctest suite.
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit or -R config]
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
mnddp_build ON
mnddp_mpi_env
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
