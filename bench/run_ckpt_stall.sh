#!/usr/bin/env bash
# How long training is blocked by a checkpoint: the same run with and without checkpoints every K
# steps, alternating; (wall time with - wall time without) / checkpoints = the stall per checkpoint,
# also shown in steps. The trainer's own "written in" times are reported beside it.
# Usage: bench/run_ckpt_stall.sh [ranks] [rounds] [hidden]   (2 3 4096: ~450 MB of AdamW state)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
ranks="${1:-2}"
rounds="${2:-3}"
hidden="${3:-4096}"
steps=60
every=10
work=$(mktemp -d "${MNDDP_BENCH_DIR:-$MNDDP_BUILD_DIR}/ckpt-stall.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 8192 --val-samples 64 --shards 2 \
  --shape 784 --classes 10 >/dev/null
export OMP_NUM_THREADS=1

run() {  # run NAME extra-args... : prints the wall seconds
  local start end
  start=$(date +%s.%N)
  mpirun -np "$ranks" --oversubscribe "$MNDDP_BUILD_DIR/mnddp" train --train-data "$work/data/train_*.h5" \
    --val-data "" --model mlp --hidden "$hidden" --layers 3 --batch-size 32 --optimizer adamw --lr 1e-4 \
    --threads 1 --max-steps "$steps" --log-interval "$steps" --metrics-file "" "$@" >"$work/$1.log" 2>&1
  end=$(date +%s.%N)
  "$MNDDP_VENV/bin/python" -c "print(round($end - $start, 3))"
}

without=()
with=()
saves=()
for round in $(seq "$rounds"); do
  rm -rf "$work/ckpt"
  without+=("$(run plain --checkpoint-dir "")")
  with+=("$(run ckpt --checkpoint-dir "$work/ckpt" --checkpoint-interval "$every" --keep-last 2 --resume none)")
  saves+=("$(grep -o 'written in [0-9.]* s' "$work/ckpt.log" | awk '{s += $3; n++} END {print s / n}')")
  size=$(du -m "$(ls -d "$work"/ckpt/step-*.h5 | tail -1)" | cut -f1)
  echo "round $round: without ${without[-1]} s, with $((steps / every)) checkpoints ${with[-1]} s," \
    "mean save ${saves[-1]} s, checkpoint ${size} MB"
done
"$MNDDP_VENV/bin/python" -c "
import statistics as s
w=[float(v) for v in '${without[*]}'.split()]; c=[float(v) for v in '${with[*]}'.split()]
saves=[float(v) for v in '${saves[*]}'.split()]
n=$steps//$every; step=s.median(w)/$steps
stall=(s.median(c)-s.median(w))/n
print(f'median: stall per checkpoint {stall:.2f} s (= {stall/step:.1f} steps of {step*1e3:.0f} ms, wall incl. start-up), '
      f'trainer-reported save {s.median(saves):.2f} s')"
