#!/usr/bin/env bash
# mnddp plan against what runs measure, on this machine: the network measured once (mnddp preflight
# --save-network, 2 ranks), then per zoo model a plan on one rank and training runs on 1..4 ranks
# with --plan, whose summaries print the prediction beside the measured step time and peak memory.
# Prints one line per (model, ranks) and the median and worst errors, the figures docs/PLAN.md
# records.
# Usage: bench/plan_accuracy.sh [steps] [model...]    (default: 30 convnet resnet18 gpt mlp)
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
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
  for np in 1 2 3 4; do
    # shellcheck disable=SC2046
    mpirun -np "$np" --oversubscribe "$bin" train $(model_args "$model") "${common[@]}" --max-steps "$steps" \
      --log-interval "$steps" --plan "$work/$model.plan.json" --metrics-file "$work/$model.$np.jsonl" \
      >"$work/$model.$np.log" 2>&1 || { cat "$work/$model.$np.log"; exit 1; }
  done
done

"$python" - "$work" "${models[@]}" <<'PY'
import json, statistics, sys
work, models = sys.argv[1], sys.argv[2:]
steps, memory = [], []
print(f"{'model':10} {'ranks':>5} {'predicted':>10} {'measured':>10} {'error':>7}   {'memory pred.':>12} {'peak RSS':>9} {'error':>7}")
for model in models:
    for np in (1, 2, 3, 4):
        s = [json.loads(l) for l in open(f"{work}/{model}.{np}.jsonl") if '"summary"' in l][-1]
        p = s["plan"]
        e = p["predicted_step_s"] / p["measured_step_s"] - 1
        m = p["predicted_memory_bytes"] / p["peak_bytes"] - 1
        steps.append(abs(e))
        memory.append(abs(m))
        print(f"{model:10} {np:>5} {p['predicted_step_s']*1e3:>8.1f}ms {p['measured_step_s']*1e3:>8.1f}ms {e:>+7.1%}   "
              f"{p['predicted_memory_bytes']/2**20:>9.0f}MiB {p['peak_bytes']/2**20:>6.0f}MiB {m:>+7.1%}")
print(f"step time: median error {statistics.median(steps):.1%}, worst {max(steps):.1%} over {len(steps)} runs")
print(f"memory:    median error {statistics.median(memory):.1%}, worst {max(memory):.1%}")
PY
