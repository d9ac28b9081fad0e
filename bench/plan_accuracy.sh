#!/usr/bin/env bash
# mnddp plan against what runs measure, on this machine: the network measured once (mnddp preflight
# --save-network, 2 ranks), then per zoo model a plan on one rank and training runs on 1..4 ranks
# with --plan, whose summaries print the prediction beside the measured step time and peak memory.
# Prints one line per (model, ranks) and the median and worst errors, the figures docs/PLAN.md
# records. With -r N every run is repeated N times, the repeats interleaved (all models and rank
# counts once, then again) so that drift on the machine spreads over every case; the error is taken
# against the median of the repeats, and the spread of the measured step (min-max) is printed beside
# it: where ranks share cores the runs themselves differ by more than the model's error.
# Usage: bench/plan_accuracy.sh [-r repeats] [steps] [model...]  (default: -r 1 30 convnet resnet18 gpt mlp)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
repeats=1
if [ "${1:-}" = -r ]; then
  repeats="${2:?-r: give the number of repeats}"
  shift 2
fi
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "plan_accuracy.sh: -r: expected a positive count, got '$repeats'" >&2; exit 2; }
steps="${1:-30}"
shift || true
models=("$@")
[ $# -gt 0 ] || models=(convnet resnet18 gpt mlp)
work=$(mktemp -d "${MNDDP_BENCH_DIR:-$MNDDP_BUILD_DIR}/plan-accuracy.XXXXXX")
[ -n "${MNDDP_BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT  # MNDDP_BENCH_KEEP=1: keep the runs' files
export OMP_NUM_THREADS=1
python="$MNDDP_VENV/bin/python"
bin="$MNDDP_BUILD_DIR/mnddp"
data="$MNDDP_BUILD_DIR/mnddp-data"
"$data" synth --out "$work/images" --train-samples 8192 --val-samples 64 --shards 4 --shape 3,32,32 --classes 10 >/dev/null
"$data" synth --out "$work/vectors" --train-samples 8192 --val-samples 64 --shards 4 --shape 256 --classes 10 >/dev/null
"$data" synth --out "$work/tokens" --task lm --train-samples 4096 --val-samples 64 --shards 4 --shape 65 --vocab 512 >/dev/null

# The model's options: data and shape.
model_args() {
  case $1 in
    convnet) echo "--train-data $work/images/train_*.h5 --model convnet --batch-size 64" ;;
    resnet18) echo "--train-data $work/images/train_*.h5 --model resnet18 --batch-size 32" ;;
    mlp) echo "--train-data $work/vectors/train_*.h5 --model mlp --hidden 1024 --layers 3 --batch-size 128" ;;
    gpt) echo "--train-data $work/tokens/train_*.h5 --task lm --model gpt --hidden 256 --layers 4 --heads 4 --batch-size 16" ;;
  esac
}
common=(--val-data "" --threads 1 --optimizer adamw --lr 1e-3 --resume none)

mpirun -np 2 --oversubscribe "$bin" preflight $(model_args convnet) "${common[@]}" --link-mb 16 --slow-below 0.05 \
  --save-network "$work/net.json" >"$work/preflight.log" 2>&1 || { cat "$work/preflight.log"; exit 1; }
grep '^  network:' "$work/preflight.log"

for model in "${models[@]}"; do
  # shellcheck disable=SC2046
  "$bin" plan $(model_args "$model") "${common[@]}" --network "$work/net.json" --max-nodes 1 --plan-steps 10 \
    --json "$work/$model.plan.json" >"$work/$model.plan.log" 2>&1 || { cat "$work/$model.plan.log"; exit 1; }
done
for rep in $(seq "$repeats"); do
  for model in "${models[@]}"; do
    for np in 1 2 3 4; do
      run="$work/$model.$np.$rep"
      # shellcheck disable=SC2046
      mpirun -np "$np" --oversubscribe "$bin" train $(model_args "$model") "${common[@]}" --max-steps "$steps" \
        --log-interval "$steps" --plan "$work/$model.plan.json" --metrics-file "$run.jsonl" \
        >"$run.log" 2>&1 || { cat "$run.log"; exit 1; }
    done
  done
done

"$python" - "$work" "$repeats" "${models[@]}" <<'PY'
import json, statistics, sys
work, repeats, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
steps, memory = [], []
print(f"{'model':10} {'ranks':>5} {'predicted':>10} {'measured':>10} {'spread':>15} {'error':>7}   "
      f"{'memory pred.':>12} {'peak RSS':>9} {'error':>7}")
for model in models:
    for np in (1, 2, 3, 4):
        plans = [[json.loads(l) for l in open(f"{work}/{model}.{np}.{r}.jsonl") if '"summary"' in l][-1]["plan"]
                 for r in range(1, repeats + 1)]
        predicted = statistics.median(p["predicted_step_s"] for p in plans)
        measured = [p["measured_step_s"] for p in plans]
        step = statistics.median(measured)
        peak = statistics.median(p["peak_bytes"] for p in plans)
        predicted_memory = statistics.median(p["predicted_memory_bytes"] for p in plans)
        e = predicted / step - 1
        m = predicted_memory / peak - 1
        steps.append(abs(e))
        memory.append(abs(m))
        spread = f"{min(measured)*1e3:.1f}-{max(measured)*1e3:.1f}"
        print(f"{model:10} {np:>5} {predicted*1e3:>8.1f}ms {step*1e3:>8.1f}ms {spread:>15} {e:>+7.1%}   "
              f"{predicted_memory/2**20:>9.0f}MiB {peak/2**20:>6.0f}MiB {m:>+7.1%}")
print(f"step time: median error {statistics.median(steps):.1%}, worst {max(steps):.1%} over {len(steps)} cases"
      f" ({repeats} run(s) each, the median taken)")
print(f"memory:    median error {statistics.median(memory):.1%}, worst {max(memory):.1%}")
PY
