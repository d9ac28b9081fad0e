#!/usr/bin/env bash
# How long training is blocked by a checkpoint: the same run without checkpoints, with synchronous
# ones and with asynchronous ones (--checkpoint-async) every K steps, alternating; (wall time with -
# wall time without) / checkpoints = the stall per checkpoint, also shown in steps. The trainer's own
# "written in" times (the whole commit) are reported beside it.
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
sync=()
async=()
blocked=()
saves=()
for round in $(seq "$rounds"); do
  rm -rf "$work/ckpt"
  without+=("$(run plain --checkpoint-dir "")")
  sync+=("$(run sync --checkpoint-dir "$work/ckpt" --checkpoint-interval "$every" --keep-last 2 --resume none \
    --checkpoint-async false)")
  rm -rf "$work/ckpt"
  async+=("$(run async --checkpoint-dir "$work/ckpt" --checkpoint-interval "$every" --keep-last 2 --resume none \
    --checkpoint-async true --log-level debug)")
  blocked+=("$(grep -o 'blocked [0-9.]* s by the checkpoint' "$work/async.log" | awk '{s += $2; n++} END {print s / n}')")
  saves+=("$(grep -o 'written in [0-9.]* s' "$work/sync.log" | awk '{s += $3; n++} END {print s / n}')")
  size=$(du -m "$(ls -d "$work"/ckpt/step-*.h5 | tail -1)" | cut -f1)
  echo "round $round: without ${without[-1]} s, $((steps / every)) checkpoints: synchronous ${sync[-1]} s," \
    "asynchronous ${async[-1]} s; mean synchronous save ${saves[-1]} s, mean asynchronous snapshot" \
    "${blocked[-1]} s, checkpoint ${size} MB"
done
"$MNDDP_VENV/bin/python" -c "
import statistics as s
w=[float(v) for v in '${without[*]}'.split()]
y=[float(v) for v in '${sync[*]}'.split()]; a=[float(v) for v in '${async[*]}'.split()]
saves=[float(v) for v in '${saves[*]}'.split()]
n=$steps//$every; step=s.median(w)/$steps
for name, runs in (('synchronous', y), ('asynchronous', a)):
    stall=(s.median(runs)-s.median(w))/n
    print(f'median {name}: stall per checkpoint {stall:.2f} s (= {stall/step:.2f} steps of {step*1e3:.0f} ms)')
blocked=[float(v) for v in '${blocked[*]}'.split()]
print(f'trainer-reported: synchronous save {s.median(saves):.2f} s, asynchronous snapshot (the step waits) '
      f'{s.median(blocked):.2f} s')"
