#!/usr/bin/env bash
# Data-loader throughput against a raw sequential read of the same files (a 2.2 GB float32 synthetic
# dataset and its gzip copy), from the page cache and, where it can be dropped, cold; then the share of
# step time a 2-rank ConvNet training run waits for data. Prints the tables for docs/BENCHMARKS.md.
# Usage: bench/run_loader_bench.sh [work dir, created and deleted] [rounds]   (after a build in ./build)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
dir="${1:-$MNDDP_BUILD_DIR/loader-bench}"
rounds="${2:-3}"
bench="$MNDDP_BUILD_DIR/bench/mnddp-bench-loader"
data="$MNDDP_BUILD_DIR/mnddp-data"
mnddp="$MNDDP_BUILD_DIR/mnddp"
for bin in "$bench" "$data" "$mnddp"; do [ -x "$bin" ] || die "build first: $bin is missing"; done
[ -e "$dir" ] && die "$dir exists: name a new directory (it is deleted at the end)"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

# 45000 samples of 3x64x64 float32 (48 KiB each): 2.21 GB in 8 shards of 1 MiB (21-sample) chunks.
say "writing the datasets under $dir"
"$data" synth --out "$dir/float32" --train-samples 45000 --val-samples 0 --shape 3,64,64 --shards 8 >/dev/null
"$data" reshard "$dir/float32" --out "$dir/gzip" --shards 8 --compression gzip >/dev/null
"$data" synth --out "$dir/convnet" --train-samples 32768 --val-samples 0 --shape 3,32,32 --shards 8 >/dev/null

echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(df -T "$dir" | awk 'NR==2 {print $2}')"
echo "case            cache order      epoch       MB  file_MB   raw_MB/s  ours_MB/s   ratio"
"$bench" --rounds "$rounds" float32="$dir/float32"
# The same without the NaN/inf check of --nonfinite-inputs error (what a first epoch pays for it).
"$bench" --rounds "$rounds" --nonfinite ignore float32-nocheck="$dir/float32"
"$bench" --rounds "$rounds" --orders sequential gzip="$dir/gzip"
# Every random sample inflates its whole 1 MiB chunk: a few batches say enough.
"$bench" --rounds "$rounds" --orders shuffled --max-batches 10 gzip="$dir/gzip"
status=0
"$bench" --rounds "$rounds" --cold float32="$dir/float32" || status=$?
[ "$status" = 2 ] && echo "# no cold run: the page cache cannot be dropped here"
[ "$status" = 0 ] || [ "$status" = 2 ] || die "mnddp-bench-loader --cold failed ($status)"

# Data wait in training: the trainer's mean wait for loader.next() per step against its step time,
# from the metrics file, leaving out the first interval (start-up).
mpirun -np 2 --oversubscribe "$mnddp" train --model convnet --hidden 32 --layers 3 --batch-size 64 --threads 1 \
  --train-data "$dir/convnet" --val-data '' --max-steps 200 --log-interval 20 \
  --metrics-file "$dir/convnet.jsonl" >"$dir/convnet.log" 2>&1 || { cat "$dir/convnet.log"; die "training failed"; }
echo
echo "model     batch  ranks  steps    step(ms)  data_wait(ms)   share"
awk -v steps=200 '/"kind":"train"/ {
    if (++n == 1) next
    match($0, /"data_wait_s":[^,}]*/); wait += substr($0, RSTART + 14, RLENGTH - 14)
    match($0, /"step_time_s":[^,}]*/); step += substr($0, RSTART + 14, RLENGTH - 14); m++
  }
  END { printf "convnet      64      2  %5d  %10.2f  %13.3f  %5.2f%%\n", steps, step / m * 1e3, wait / m * 1e3,
               100 * wait / step }' "$dir/convnet.jsonl"
