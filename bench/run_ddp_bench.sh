#!/usr/bin/env bash
# Runs the DDP engine benchmarks (issue: DDP engine) and prints the tables for docs/BENCHMARKS.md.
# Usage: bench/run_ddp_bench.sh [reps]   (after scripts/test.sh or a build in ./build)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
reps="${1:-30}"
bin="$MNDDP_BUILD_DIR/bench/mnddp-bench-ddp"
[ -x "$bin" ] || die "build first: $bin is missing"
echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
mpirun -np 2 --oversubscribe "$bin" sync "$reps"
mpirun -np 2 --oversubscribe "$bin" overlap "$reps"
mpirun -np 1 "$bin" overhead "$reps"
# Weak scaling's ceiling on this machine: the MLPs' steps are short, so ten times the repetitions.
mpirun -np 2 --oversubscribe "$bin" scaling "$((reps * 10))" mlp-small,mlp
