# The DDP options change how gradients travel, not what training computes. Each run below is held
# against the same reference run (2 ranks, batch 16, fp32 all-reduce), parameter by parameter, within
# a stated bound; a bound with a floor says the option must show (compression that changes nothing
# is not compressing):
# - --grad-accum-steps 2 with --batch-size 8: the same 32 samples per step, so equal up to summation
#   order (relative 1e-5);
# - --find-unused-parameters on a model that uses every parameter: the same arithmetic (1e-6);
# - --grad-compression fp16 (11-bit mantissa) within 5e-3, bf16 (8-bit) within 0.1, both above 0
#   (measured 2.5e-4 and 3.4e-2);
# - --amp bf16 (autocast forward) within 0.15 and above 0, and validation accuracy within 0.05.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 2048 --val-samples 512 --shards 2 --shape 24 \
  --classes 4 --noise 2 --seed 11 >/dev/null
COMMON=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --num-classes 4 --hidden 32
  --layers 2 --optimizer sgd --lr 0.05 --momentum 0.9 --max-steps 30 --epochs 1 --metrics-file ""
  --checkpoint-async false --bucket-cap-mb 0.004 --first-bucket-mb 0.002)

# train NAME OPTIONS...: a 2-rank run whose final state is $WORK/NAME/step-00000030.h5.
train() {
  local name=$1
  shift
  run_mpi 2 120 "${COMMON[@]}" --batch-size 16 --checkpoint-dir "$WORK/$name" "$@"
  if [ "$RC" != 0 ]; then
    fail "$name: rc $RC"$'\n'"$ERR"
    return 1
  fi
  grep -o 'final validation accuracy: [0-9.]*' <<<"$OUT" | awk '{print $4}' >"$WORK/$name.accuracy"
}

# expect_close NAME LOW HIGH: the model arrays of NAME's final checkpoint against the reference's:
# the largest relative difference (per array, against the reference's largest value) in [LOW, HIGH].
expect_close() {
  local name=$1 low=$2 high=$3
  CASES=$((CASES + 1))
  local diff
  diff=$("$MNDDP_PYTHON" - "$WORK/reference/step-00000030.h5" "$WORK/$name/step-00000030.h5" <<'PY'
import sys, h5py, numpy as np
worst = 0.0
with h5py.File(sys.argv[1], "r") as ref, h5py.File(sys.argv[2], "r") as got:
    for name, a in ref["model"].items():
        a, b = a[()].astype(np.float64), got["model"][name][()].astype(np.float64)
        worst = max(worst, float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(a))), 1e-12))
print(f"{worst:.3g}")
PY
)
  if awk -v d="$diff" -v lo="$low" -v hi="$high" 'BEGIN{exit !(d >= lo && d <= hi)}'; then
    pass "$name: largest relative parameter difference $diff, in [$low, $high]"
  else
    fail "$name: largest relative parameter difference '$diff', expected in [$low, $high]"
  fi
}

train reference || { finish; exit 1; }
if train accumulation --batch-size 8 --grad-accum-steps 2; then expect_close accumulation 0 1e-5; fi
if train find_unused --find-unused-parameters; then expect_close find_unused 0 1e-6; fi
if train fp16_wire --grad-compression fp16; then expect_close fp16_wire 1e-9 5e-3; fi
if train bf16_wire --grad-compression bf16; then expect_close bf16_wire 1e-9 0.1; fi
if train amp_bf16 --amp bf16; then
  expect_close amp_bf16 1e-9 0.15
  CASES=$((CASES + 1))
  ref=$(cat "$WORK/reference.accuracy")
  got=$(cat "$WORK/amp_bf16.accuracy")
  if awk -v a="$ref" -v b="$got" 'BEGIN{d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.05)}'; then
    pass "amp_bf16: validation accuracy $got against $ref (within 0.05)"
  else
    fail "amp_bf16: validation accuracy '$got' against '$ref'"
  fi
fi
finish
