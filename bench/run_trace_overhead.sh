#!/usr/bin/env bash
# What --trace costs a training run: the same 2-rank run with and without it, alternating, R rounds;
# each round's ratio of the step time (the end-of-run summary's mean over ranks, so start-up, the
# trace's barrier and the file's closing are outside it). Two workloads: the MLP demo with its
# default buckets (a short step: the worst case for a fixed cost per event) and the same with
# 0.05 MiB buckets (many all-reduces per step: the most comm events per step).
# Usage: bench/run_trace_overhead.sh [rounds] [steps]   (after a build in ./build)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
rounds="${1:-7}"
steps="${2:-600}"
mnddp="$MNDDP_BUILD_DIR/mnddp"
[ -x "$mnddp" ] || die "build first: $mnddp is missing"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$dir/data" --train-samples 16384 --val-samples 0 --shape 64 \
  --shards 2 >/dev/null

# step_ms ARGS...: one run's mean step time in ms (the summary's "step time" line).
step_ms() {
  mpirun -np 2 --oversubscribe "$mnddp" train --train-data "$dir/data/train_*.h5" --val-data "" --batch-size 32 --threads 1 \
    --epochs 1000 --max-steps "$steps" --log-interval 50 --metrics-file "" --progress lines "$@" |
    awk '/^  step time/ {print $3}'
}

echo "# $(date -u +%Y-%m-%d) $(nproc) cores; $rounds rounds of $steps steps on 2 ranks, alternating"
for buckets in ${MNDDP_TRACE_BENCH_BUCKETS:-default 0.05}; do
  extra=()
  [ "$buckets" = default ] || extra=(--bucket-cap-mb "$buckets" --first-bucket-mb "$buckets")
  ratios=()
  for round in $(seq "$rounds"); do
    off=$(step_ms "${extra[@]}")
    on=$(step_ms "${extra[@]}" --trace "$dir/trace")
    events=$(($(wc -l <"$dir/trace/rank-00000.trace.json") / steps))
    ratios+=("$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.4f", a / b}')")
    echo "buckets $buckets round $round: step $off ms without, $on ms with --trace (~$events events per step); ratio ${ratios[-1]}"
    rm -rf "$dir/trace"
  done
  printf '%s\n' "${ratios[@]}" | sort -n |
    awk -v b="$buckets" '{r[NR] = $1} END {printf "buckets %s: median ratio %.4f (min %.4f, max %.4f)\n", b, r[int((NR + 1) / 2)], r[1], r[NR]}'
done
