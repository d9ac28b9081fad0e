#!/usr/bin/env bash
# Writes tests/test_costs.cmake from the last full ctest run's measured times (ctest's own
# Testing/Temporary/CTestCostData.txt): each test's COST, so that a fresh build directory (CI's
# clean clone, which has no such file) runs the longest tests first, as a build with history does.
# Without it ctest runs a fresh tree's tests in definition order, and the slowest ones (the fault
# matrix, the PyTorch interop, the Slurm chain) start last, with nothing left to run beside them.
# Usage: scripts/test_costs.sh [build dir]   (after a full `scripts/test.sh`)
set -euo pipefail
source "$(dirname "$0")/common.sh"
build="${1:-$MNDDP_BUILD_DIR}"
data="$build/Testing/Temporary/CTestCostData.txt"
[ -f "$data" ] || die "no $data: run the whole suite first (scripts/test.sh)"
out="$MNDDP_ROOT/tests/test_costs.cmake"
{
  echo "# Each test's COST: its seconds in a full run on the 2-core development machine (scripts/test_costs.sh"
  echo "# writes this file). ctest starts the costliest first; a build directory with its own history uses that."
  awk 'NF == 3 && $1 != "---" { printf "%s %.0f\n", $1, $3 }' "$data" | sort |
    awk '{ printf "if(TEST %s)\n  set_tests_properties(%s PROPERTIES COST %s)\nendif()\n", $1, $1, ($2 < 1 ? 1 : $2) }'
} >"$out"
say "wrote $out ($(grep -c '^if' "$out") tests)"
