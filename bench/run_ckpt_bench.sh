#!/usr/bin/env bash
# Checkpoint write/read throughput against raw sequential I/O of the same bytes, on 1, 2 and 4 ranks.
# Usage: bench/run_ckpt_bench.sh [dir on the file system to test] [MB] [reps]
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
dir="${1:-$MNDDP_ROOT/build/ckpt-bench}"
mb="${2:-512}"
reps="${3:-3}"
echo "# $(date -u +%Y-%m-%d) $(nproc) cores; state of ${mb} MB in $dir ($(df -T "$(dirname "$dir")" | awk 'NR==2 {print $2}'))"
echo "ranks     MB  what           MB/s   raw MB/s   ratio"
for np in 1 2 4; do
  mpirun -np "$np" --oversubscribe "$MNDDP_BUILD_DIR/bench/mnddp-bench-ckpt" "$dir" "$mb" "$reps"
done
