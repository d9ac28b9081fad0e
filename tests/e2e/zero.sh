# ZeRO (--zero 1|2) changes where the optimizer state and the gradients live, not what training
# computes. Each run is held against --zero 0 on the same ranks, array by array (the parameters and
# the optimizer state, which a ZeRO checkpoint stores whole): the largest difference relative to the
# array's largest value must stay within the stated bound (for a parameter, relative to 0.01 at
# least: an attention key's bias has a zero gradient in exact arithmetic and holds only noise).
# - AdamW and SGD update each element on its own, so ZeRO-1 (the same all-reduce) is bitwise the
#   same (bound 0), and so is ZeRO-2 on 2 ranks; on 3 ranks MPI's reduce-scatter adds the three
#   gradients in another order than its all-reduce: 1e-5 after 30 steps (measured 4e-7);
# - LAMB and LARS take norms over a parameter, which ZeRO adds up from the ranks' pieces in another
#   order: 1e-5 after 30 steps (measured 2e-7 to 4e-7);
# - gradient clipping (active at every step here) takes the norm of the whole model, again added
#   up in another order; with the clip inactive gpt is bitwise the same, with it the coefficient
#   differs in its last bits and AdamW magnifies that in the near-zero gradients of the attention
#   biases: 1e-4 after 30 steps (measured 2.3e-5 to 2.9e-5, all of it in c_attn.bias);
# - every bucket here is a few hundred values (--bucket-cap-mb 0.004), so parameters straddle
#   chunks, and 3 ranks do not divide the parameter counts.
# Then a checkpoint written by 3 ranks with --zero 2 is resumed by 2 ranks with --zero 1 (the same
# global batch of 48): it ends where an uninterrupted 2-rank --zero 0 run ends, within 1e-5.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}"

"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 2048 --val-samples 256 --shards 2 --shape 24 \
  --classes 4 --noise 2 --seed 11 >/dev/null
"$MNDDP_DATA_BIN" synth --task lm --vocab 32 --shape 17 --out "$WORK/lm" --train-samples 768 --val-samples 64 \
  --shards 2 --seed 5 >/dev/null
COMMON=(--max-steps 30 --epochs 1 --metrics-file "" --checkpoint-async false --bucket-cap-mb 0.004
  --first-bucket-mb 0.002 --log-interval 10)
MLP=(--train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" --num-classes 4 --hidden 32 --layers 2)
GPT=(--task lm --model gpt --hidden 32 --layers 2 --heads 2 --train-data "$WORK/lm/train_*.h5"
  --val-data "$WORK/lm/val_*.h5")

# train NAME NP OPTIONS...: a run whose final state is $WORK/NAME/step-00000030.h5.
train() {
  local name=$1 np=$2
  shift 2
  run_mpi "$np" 120 "${COMMON[@]}" --checkpoint-dir "$WORK/$name" "$@"
  if [ "$RC" != 0 ]; then
    fail "$name: rc $RC"$'\n'"$ERR"
    return 1
  fi
}

# expect_close REFERENCE NAME BOUND: every model/ and optimizer/ array of NAME's final checkpoint
# against REFERENCE's, the same arrays on both sides.
expect_close() {
  local reference=$1 name=$2 bound=$3
  CASES=$((CASES + 1))
  local diff
  diff=$("$MNDDP_PYTHON" - "$WORK/$reference/step-00000030.h5" "$WORK/$name/step-00000030.h5" <<'PY'
import sys, h5py, numpy as np
def arrays(path):
    out = {}
    with h5py.File(path, "r") as f:
        for group in ("model", "optimizer"):
            f[group].visititems(lambda n, o: out.__setitem__(f"{group}/{n}", o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
ref, got = arrays(sys.argv[1]), arrays(sys.argv[2])
if sorted(ref) != sorted(got):
    print("different arrays:", sorted(set(ref) ^ set(got))[:5]); sys.exit()
worst = 0.0
for name, a in ref.items():
    a, b = np.asarray(a, np.float64), np.asarray(got[name], np.float64)
    floor = 1e-2 if name.startswith("model/") else 1e-12
    worst = max(worst, float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(a))), floor))
print(f"{worst:.3g} over {len(ref)} arrays")
PY
)
  if awk -v d="${diff%% *}" -v hi="$bound" 'BEGIN{exit !(d ~ /^[0-9.e+-]+$/ && d <= hi)}'; then
    pass "$name: largest relative difference from $reference $diff (bound $bound)"
  else
    fail "$name: largest relative difference from $reference '$diff', bound $bound"
  fi
}

# compare CASE NP BOUND1 BOUND2 OPTIONS...: --zero 1 and 2 against --zero 0 on NP ranks.
compare() {
  local case=$1 np=$2
  local -A bound=([1]=$3 [2]=$4)
  shift 4
  train "$case-np$np-z0" "$np" "$@" --zero 0 || return
  for zero in 1 2; do
    if train "$case-np$np-z$zero" "$np" "$@" --zero "$zero"; then
      expect_close "$case-np$np-z0" "$case-np$np-z$zero" "${bound[$zero]}"
    fi
  done
}

compare mlp-adamw-cosine 2 0 0 "${MLP[@]}" --optimizer adamw --lr 0.01 --lr-schedule cosine --batch-size 16
compare mlp-adamw-cosine 3 0 1e-5 "${MLP[@]}" --optimizer adamw --lr 0.01 --lr-schedule cosine --batch-size 16
for np in 2 3; do
  compare gpt-adamw-clip "$np" 1e-4 1e-4 "${GPT[@]}" --optimizer adamw --lr 0.003 --grad-clip 0.05 --batch-size 8
done
compare mlp-sgd-accumulate 3 0 1e-5 "${MLP[@]}" --optimizer sgd --lr 0.05 --momentum 0.9 --batch-size 8 \
  --grad-accum-steps 2
compare mlp-lamb 3 1e-5 1e-5 "${MLP[@]}" --optimizer lamb --lr 0.01 --weight-decay 0.01 --batch-size 16
compare mlp-amp-bf16-wire 2 0 0 "${MLP[@]}" --optimizer adamw --lr 0.01 --batch-size 16 --amp bf16 \
  --grad-compression bf16
compare mlp-lars 2 1e-5 1e-5 "${MLP[@]}" --optimizer lars --lr 0.1 --weight-decay 1e-4 --batch-size 16

# The ZeRO log line says what each rank holds.
CASES=$((CASES + 1))
if grep -q -- "--zero 1: optimizer state 0.01 MiB on this rank (0.02 MiB for the whole model, over 2 ranks)" \
  <<<"$(train state-bytes 2 "${MLP[@]}" --optimizer adamw --batch-size 16 --zero 1 --max-steps 1; echo "$OUT$ERR")"; then
  pass "the optimizer-state bytes per rank are logged"
else
  fail "no optimizer-state line: $OUT"
fi

# World-size-free: 3 ranks x 16 with --zero 2 stop at step 15; 2 ranks x 24 with --zero 1 go on.
RESUME=("${MLP[@]}" --optimizer adamw --lr 0.01 --lr-schedule cosine)
train resume-reference 2 "${RESUME[@]}" --batch-size 24 --zero 0
if train resume 3 "${RESUME[@]}" --batch-size 16 --zero 2 --steps-per-run 15 &&
  train resume 2 "${RESUME[@]}" --batch-size 24 --zero 1; then
  expect_close resume-reference resume 1e-5
fi
# The 3-rank --zero 2 checkpoint (its optimizer state written as every rank's share of each array):
# h5py verifies every array's XXH3-64 as for any checkpoint, load_checkpoint.py loads it, and
# mnddp export reads it.
check "a --zero 2 checkpoint verifies with h5py (load_checkpoint.py --verify)" "$MNDDP_PYTHON" \
  "$MNDDP_SOURCE_DIR/data_tools/load_checkpoint.py" "$WORK/resume/step-00000015.h5" --verify
check "... and load_checkpoint.py loads it" "$MNDDP_PYTHON" - "$WORK/resume/step-00000015.h5" \
  "$MNDDP_SOURCE_DIR/data_tools" <<'PY'
import sys, h5py
sys.path.insert(0, sys.argv[2])
from load_checkpoint import load_checkpoint
with h5py.File(sys.argv[1], "r") as f:
    assert f["optimizer/body.0.weight/exp_avg"].shape == f["model/body.0.weight"].shape
model, config = load_checkpoint(sys.argv[1])
print(f"{sum(p.numel() for p in model.parameters())} parameters loaded")
PY
check "... and mnddp export reads it" "$MNDDP_BIN" export --checkpoint "$WORK/resume/step-00000015.h5" \
  --out "$WORK/zero.pt"
finish
