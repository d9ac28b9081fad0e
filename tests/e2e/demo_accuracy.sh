# The quick-start run, smaller: configs/demo.ini on 2 ranks must reach the stated accuracy and write
# the metrics file with every field.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_SOURCE_DIR:?}"
THRESHOLD=0.85  # measured 0.919 (2 ranks, 3 epochs); chance is 0.10

"$MNDDP_DATA_BIN" synth --out "$WORK/demo" --train-samples 16384 --val-samples 4096 --shards 4 --shape 1,28,28 \
  --classes 10 --noise 8 --seed 1234 >/dev/null
run_mpi 2 300 --config "$MNDDP_SOURCE_DIR/configs/demo.ini" --train-data "$WORK/demo/train_*.h5" \
  --val-data "$WORK/demo/val_*.h5" --metrics-file "$WORK/metrics.jsonl"
CASES=$((CASES + 1))
accuracy=$(grep -o 'final validation accuracy: [0-9.]*' <<<"$OUT" | awk '{print $4}')
if [ "$RC" = 0 ] && [ -n "$accuracy" ] && awk -v a="$accuracy" -v t="$THRESHOLD" 'BEGIN{exit !(a >= t)}'; then
  pass "demo reaches accuracy $accuracy >= $THRESHOLD"
else
  fail "demo accuracy '$accuracy' (rc $RC)"$'\n'"$OUT"$'\n'"$ERR"
fi

CASES=$((CASES + 1))
fields='"step" "epoch" "loss" "lr" "samples_per_s" "step_time_s" "data_wait_s"'
line=$(grep '"kind":"train"' "$WORK/metrics.jsonl" | head -1)
missing=""
for f in $fields; do grep -qF "$f" <<<"$line" || missing="$missing $f"; done
if [ -n "$line" ] && [ -z "$missing" ] && grep -q '"kind":"eval"' "$WORK/metrics.jsonl"; then
  pass "metrics JSONL has every field"
else
  fail "metrics JSONL missing:$missing"$'\n'"$(head -3 "$WORK/metrics.jsonl")"
fi
finish
