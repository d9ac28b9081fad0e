#!/usr/bin/env bash
# Fault soak (not in CI): N randomised trials of crash and hang faults on 2-4 ranks, injected
# (--inject-fault crash|hang at a random step and rank) or from outside (kill -9 of a random rank
# at a random moment, often mid-checkpoint with a checkpoint every step). Reports how many trials
# ended cleanly (non-zero exit, every process gone, within --collective-timeout + 15 s), the worst
# time-to-exit, and whether the latest checkpoint was loadable (every CRC-32 matches) after each.
# Usage: bench/fault_soak.sh [trials=50] [seed]
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
trials="${1:-50}"
RANDOM="${2:-$$}"
timeout_s=5
deadline=$((timeout_s + 15))
work=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 2048 --val-samples 64 --shards 4 --shape 64 \
  >/dev/null

latest_loadable() {  # latest_loadable DIR: `latest` names a checkpoint whose every CRC-32 matches
  "$MNDDP_VENV/bin/python" - "$1" <<'PY'
import sys, zlib, h5py, numpy as np
d = sys.argv[1]
with h5py.File(f"{d}/" + open(f"{d}/latest").read().strip(), "r") as f:
    bad = []
    f.visititems(lambda p, o: bad.append(p) if isinstance(o, h5py.Dataset) and
                 zlib.crc32(np.ascontiguousarray(o[()]).tobytes()) != int(o.attrs["crc32"]) else None)
sys.exit(1 if bad else 0)
PY
}

clean=0
loadable=0
worst=0
for trial in $(seq "$trials"); do
  ranks=$((2 + RANDOM % 3))
  kind=$(( RANDOM % 3 ))  # 0 crash, 1 hang, 2 kill -9 from outside
  step=$((3 + RANDOM % 25))
  victim=$((RANDOM % ranks))
  ck="$work/ck$trial"
  args=(train --threads 1 --train-data "$work/data/train_*.h5" --val-data "" --batch-size 16 --epochs 100
    --metrics-file "" --collective-timeout "$timeout_s" --checkpoint-dir "$ck" --checkpoint-interval 1
    --hidden 256 --log-interval 1)
  case $kind in
    0) what="crash@$step:$victim"; args+=(--inject-fault "$what") ;;
    1) what="hang@$step:$victim"; args+=(--inject-fault "$what") ;;
    2) what="kill -9 of rank $victim after step $step" ;;
  esac
  start=$(date +%s.%N)
  mpirun -np "$ranks" --oversubscribe "$MNDDP_BUILD_DIR/mnddp" "${args[@]}" >"$work/out" 2>&1 &
  launcher=$!
  if [ "$kind" = 2 ]; then
    for _ in $(seq 300); do grep -q "step $step/" "$work/out" 2>/dev/null && break; sleep 0.05; done
    sleep "0.$((RANDOM % 10))"
    pid=$(pgrep -f "mnddp train" -P "$launcher" | sed -n "$((victim + 1))p")
    start=$(date +%s.%N)
    [ -n "$pid" ] && kill -9 "$pid"
  fi
  ended=0
  for _ in $(seq $((deadline * 10 + 50))); do
    if ! kill -0 "$launcher" 2>/dev/null; then ended=1; break; fi
    sleep 0.1
  done
  if [ "$ended" = 0 ]; then pkill -9 -P "$launcher" || true; fi
  rc=0
  wait "$launcher" || rc=$?
  seconds=$("$MNDDP_VENV/bin/python" -c "import time; print(round(time.time() - $start, 1))")
  leftovers=$(pgrep -f "mnddp train.*$ck" | wc -l || true)
  ok=no
  if [ "$ended" = 1 ] && [ "$rc" != 0 ] && [ "$leftovers" = 0 ] &&
    "$MNDDP_VENV/bin/python" -c "import sys; sys.exit(0 if $seconds <= $deadline else 1)"; then
    ok=yes
    clean=$((clean + 1))
  fi
  ckpt=none
  if [ -e "$ck/latest" ]; then
    if latest_loadable "$ck"; then ckpt=loadable; loadable=$((loadable + 1)); else ckpt=CORRUPT; fi
  else
    loadable=$((loadable + 1))  # died before the first checkpoint: nothing to lose
  fi
  worst=$("$MNDDP_VENV/bin/python" -c "print(max($worst, $seconds))")
  printf 'trial %2d: %d ranks, %-32s rc %3s, %5.1f s, clean %s, latest %s\n' "$trial" "$ranks" "$what" "$rc" \
    "$seconds" "$ok" "$ckpt"
  rm -rf "$ck"
done
echo "ended cleanly: $clean/$trials; latest checkpoint loadable: $loadable/$trials; worst time-to-exit ${worst} s" \
  "(--collective-timeout $timeout_s, deadline $deadline s)"
