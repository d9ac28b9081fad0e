# The data options end to end, on 2 ranks: --partition shard trains to accuracy; uint8 inputs
# (scaled by 1/255) and --feature-stats normalisation train to accuracy; NaN inputs stop the run with
# a message naming the file unless --nonfinite-inputs warn; gzip shards with --shuffle-unit chunk
# train to accuracy; shard mode and --shuffle-unit chunk refuse a resume on another world size.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}"

"$MNDDP_DATA_BIN" synth --out "$WORK/d" --train-samples 4096 --val-samples 512 --shards 4 --shape 64 --noise 1.5 \
  >/dev/null
COMMON=(--val-data "$WORK/d/val_*.h5" --batch-size 32 --epochs 2 --metrics-file "" --lr 0.02)

accuracy_at_least() {  # accuracy_at_least NAME THRESHOLD
  local accuracy
  accuracy=$(grep -o 'final validation accuracy: [0-9.]*' <<<"$OUT" | awk '{print $4}')
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$accuracy" ] && awk -v a="$accuracy" -v t="$2" 'BEGIN{exit !(a >= t)}'; then
    pass "$1: accuracy $accuracy >= $2"
  else
    fail "$1: accuracy '$accuracy' (rc $RC) $ERR"
  fi
}

run_mpi 2 120 --train-data "$WORK/d/train_*.h5" "${COMMON[@]}" --partition shard --shuffle-buffer 256
accuracy_at_least "--partition shard" 0.9

# Gzip+shuffle shards (mnddp-data reshard), decoded by mnddp on 2 threads, shuffled by chunk.
"$MNDDP_DATA_BIN" reshard "$WORK/d/train_*.h5" --out "$WORK/gz" --shards 4 --shuffle --compression gzip >/dev/null
run_mpi 2 120 --train-data "$WORK/gz/shard_*.h5" "${COMMON[@]}" --shuffle-unit chunk --shuffle-window 4 \
  --loader-threads 2
accuracy_at_least "gzip shards, --shuffle-unit chunk" 0.9
run_mpi 2 120 --train-data "$WORK/gz/shard_*.h5" "${COMMON[@]}" --shuffle-unit chunk --checkpoint-dir "$WORK/ckc" \
  --steps-per-run 10
run_mpi 1 30 --train-data "$WORK/gz/shard_*.h5" "${COMMON[@]}" --batch-size 64 --shuffle-unit chunk \
  --checkpoint-dir "$WORK/ckc"
expect_usage_error "--shuffle-unit chunk refuses a resume on another world size" "--shuffle-unit chunk" \
  "written by 2 ranks"

"$MNDDP_DATA_BIN" stats "$WORK/d/train_*.h5" --out "$WORK/stats.json" >/dev/null
run_mpi 2 120 --train-data "$WORK/d/train_*.h5" "${COMMON[@]}" --feature-stats "$WORK/stats.json"
accuracy_at_least "--feature-stats normalisation" 0.9

# uint8 copies of the same data (shifted into 0..255), written with h5py.
"$MNDDP_PYTHON" - "$WORK" <<'PY'
import glob, os, sys, h5py, numpy as np
work = sys.argv[1]
os.makedirs(f"{work}/u8")
for path in sorted(glob.glob(f"{work}/d/*.h5")):
    with h5py.File(path, "r") as src, h5py.File(f"{work}/u8/{os.path.basename(path)}", "w") as dst:
        dst["x"] = np.clip(src["x"][...] * 16 + 128, 0, 255).astype(np.uint8)
        dst["y"] = src["y"][...]
with h5py.File(f"{work}/d/train_000.h5", "r") as src, h5py.File(f"{work}/nan.h5", "w") as dst:
    x = src["x"][...]
    x[7, 3] = np.nan
    dst["x"] = x
    dst["y"] = src["y"][...]
PY
U8=(--train-data "$WORK/u8/train_*.h5" "${COMMON[@]}" --val-data "$WORK/u8/val_*.h5" --lr 0.1 --epochs 6)
run_mpi 2 120 "${U8[@]}"
accuracy_at_least "uint8 inputs scaled by 1/255" 0.85  # measured 0.89
# The control: the same run on raw 0..255 values diverges (measured 0.08), so the scaling is real.
run_mpi 2 120 "${U8[@]}" --scale-uint8=false
accuracy=$(grep -o 'final validation accuracy: [0-9.]*' <<<"$OUT" | awk '{print $4}')
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && awk -v a="$accuracy" 'BEGIN{exit !(a < 0.5)}'; then
  pass "--scale-uint8=false on the same data does not learn ($accuracy)"
else
  fail "control without scaling: accuracy '$accuracy' (rc $RC)"
fi

run_mpi 2 30 --train-data "$WORK/nan.h5" --val-data "" --batch-size 32 --epochs 1 --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 2 ] && grep -q "nan.h5" <<<"$ERR"; then
  pass "NaN input stops the run naming the file: $(grep -m1 'nan.h5' <<<"$ERR")"
else
  fail "NaN input (rc $RC): $ERR"
fi
# NaN inputs make NaN gradients: with warn, the steps they touch are skipped (--on-nonfinite skip).
run_mpi 2 30 --train-data "$WORK/nan.h5" --val-data "" --batch-size 32 --epochs 1 --metrics-file "" \
  --nonfinite-inputs warn --on-nonfinite skip
CASES=$((CASES + 1))
if [ "$RC" = 0 ]; then pass "--nonfinite-inputs warn trains on"; else fail "warn policy (rc $RC): $ERR"; fi

run_mpi 2 120 --train-data "$WORK/d/train_*.h5" "${COMMON[@]}" --partition shard --checkpoint-dir "$WORK/ck" \
  --steps-per-run 10
run_mpi 1 30 --train-data "$WORK/d/train_*.h5" "${COMMON[@]}" --batch-size 64 --partition shard --checkpoint-dir "$WORK/ck"
expect_usage_error "shard mode refuses a resume on another world size" "--partition shard" "written by 2 ranks"
finish
