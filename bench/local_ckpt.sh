#!/usr/bin/env bash
# What node-local checkpoints cost, against file-system ones of the same model, on one node under
# mpirun: per round, alternating, the same training without checkpoints ("none"), with node-local
# checkpoints every 10 steps in /dev/shm ("local"), and with file-system ones every 10 steps in the
# build directory's file system ("fs"); each asynchronously (the default) and synchronously
# (--checkpoint-async false, where the step waits for the whole write). Prints, per model, the
# median step time of each, the overhead of local checkpoints every 10 steps against none, and the
# stall per checkpoint: how long training was blocked for each (the run summary's own measure: the
# snapshot when asynchronous, the whole write when synchronous).
# Usage: bench/local_ckpt.sh [rounds] [model...]     (default: 3 convnet resnet18)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
rounds="${1:-3}"
shift || true
models=("${@:-convnet}")
[ $# -gt 0 ] || models=(convnet resnet18)
ranks=2
work=$(mktemp -d "${MNDDP_BENCH_DIR:-$MNDDP_BUILD_DIR}/local-ckpt.XXXXXX")
shm=/dev/shm/mnddp-bench-$$
trap 'rm -rf "$work" "$shm"*' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 4096 --val-samples 64 --shards 2 \
  --shape 3,32,32 --classes 10 >/dev/null
export OMP_NUM_THREADS=1
python="$MNDDP_VENV/bin/python"

# run MODEL STEPS NAME extra-args... : trains; prints "step_s local_blocked_per fs_blocked_per"
run() {
  local model=$1 steps=$2 name=$3
  shift 3
  mpirun -np "$ranks" --oversubscribe "$MNDDP_BUILD_DIR/mnddp" train --train-data "$work/data/train_*.h5" \
    --val-data "" --model "$model" --batch-size 32 --optimizer sgd --lr 0.01 --threads 1 --max-steps "$steps" \
    --log-interval "$steps" --metrics-file "$work/$name.jsonl" --resume none "$@" >"$work/$name.log" 2>&1
  "$python" - "$work/$name.jsonl" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
c = s.get("checkpoints", {})
per = lambda l: l["blocked_s"] / l["count"] if l.get("count") else 0.0
print(s["training_s"] / s["steps_this_run"], per(c.get("local", {})), per(c.get("file_system", {})))
PY
  rm -rf "$work/$name.jsonl" "$work/fs-$name" "$shm-$name"
}

for model in "${models[@]}"; do
  steps=60
  [ "$model" = convnet ] || steps=30
  declare -A step=() blocked=()
  for round in $(seq "$rounds"); do
    for variant in none local fs local-sync fs-sync; do
      args=()
      case $variant in
        none) args=(--checkpoint-dir "") ;;
        local*) args=(--checkpoint-dir "$work/fs-$variant" --checkpoint-interval 100000
          --local-checkpoint-dir "$shm-$variant" --local-checkpoint-interval 10) ;;
        fs*) args=(--checkpoint-dir "$work/fs-$variant" --checkpoint-interval 10) ;;
      esac
      [[ $variant == *-sync ]] && args+=(--checkpoint-async false)
      read -r s local fs < <(run "$model" "$steps" "$variant" "${args[@]}")
      step[$variant]+=" $s"
      blocked[$variant]+=" $([[ $variant == local* ]] && echo "$local" || echo "$fs")"
    done
    echo "$model round $round: step s none${step[none]##* } local${step[local]##* } fs${step[fs]##* }" \
      "local-sync${step[local-sync]##* } fs-sync${step[fs-sync]##* }"
  done
  "$python" - "$model" "${step[none]}" "${step[local]}" "${step[fs]}" "${blocked[local]}" "${blocked[fs]}" \
    "${blocked[local-sync]}" "${blocked[fs-sync]}" <<'PY'
import statistics as st, sys
model = sys.argv[1]
none, local, fs, b_local, b_fs, b_local_sync, b_fs_sync = ([float(v) for v in a.split()] for a in sys.argv[2:9])
m = st.median
print(f"{model}: step {m(none)*1e3:.0f} ms without checkpoints; node-local every 10 steps: {m(local)*1e3:.0f} ms "
      f"({(m(local)/m(none)-1)*100:+.1f}%); file system every 10: {m(fs)*1e3:.0f} ms ({(m(fs)/m(none)-1)*100:+.1f}%)")
print(f"{model}: training blocked per checkpoint: node-local {m(b_local)*1e3:.1f} ms (synchronous "
      f"{m(b_local_sync)*1e3:.1f} ms), file system {m(b_fs)*1e3:.1f} ms (synchronous {m(b_fs_sync)*1e3:.1f} ms)")
PY
done
