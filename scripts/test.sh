#!/usr/bin/env bash
# The test command: install, build (always with the tests) and run the whole ctest suite.
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit or -R config]
# Fails when ctest finds no test to run (an empty build, or a -R/-L filter that matches nothing):
# a run that tested nothing must not look like a green one.
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
mnddp_build
mnddp_mpi_env
cd "$MNDDP_BUILD_DIR"
ctest --output-on-failure --no-tests=error -j "$(nproc)" --timeout 900 "$@"
