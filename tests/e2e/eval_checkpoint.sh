# `mnddp eval` and --keep-best end to end. eval rebuilds a checkpoint's model from its stored config
# and gives, on 1 or 3 ranks, exactly the metrics the 2-rank training run printed (classification,
# regression, and lm with the vocabulary derived from the data). --keep-best keeps the checkpoint
# that validated best as best.h5 outside the keep-last rotation (lower loss, higher accuracy), and
# a resumed run keeps it unless it does better.
source "$(dirname "$0")/lib.sh"

# eval_run NP ARGS...: mnddp eval under mpirun; sets RC, OUT, ERR.
eval_run() {
  local np=$1
  shift
  timeout --kill-after=5 120 "$MPIEXEC" -np "$np" --oversubscribe "$MNDDP_BIN" eval --threads 1 "$@" \
    >"$WORK/out" 2>"$WORK/err"
  RC=$?
  OUT=$(grep '^validation' "$WORK/out")  # the metric lines (the log goes to stdout too)
  ERR=$(cat "$WORK/err")
}
# metric_at FILE STEP NAME: NAME in the eval line of STEP.
metric_at() { grep '"kind":"eval"' "$1" | grep "\"step\":$2[,}]" | grep -o "\"$3\":[-0-9.e+]*" | cut -d: -f2; }

"$MNDDP_DATA_BIN" synth --out "$WORK/cls" --train-samples 2048 --val-samples 509 --shards 2 --shape 32 --classes 6 \
  --noise 1.4 >/dev/null
CLS=(--train-data "$WORK/cls/train_*.h5" --val-data "$WORK/cls/val_*.h5" --num-classes 6 --hidden 32)

# 1. eval of the final checkpoint equals the run's own final validation, on 1 and 3 ranks.
run_mpi 2 300 "${CLS[@]}" --epochs 2 --checkpoint-dir "$WORK/run" --metrics-file ""
trained=$(grep '^final validation' <<<"$OUT" | sed 's/^final //')
for np in 1 3; do
  eval_run "$np" --checkpoint "$WORK/run"
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$trained" ] && [ "$OUT" = "$trained" ]; then
    pass "eval on $np rank(s) = the training run's final validation: $(tr '\n' ' ' <<<"$OUT")"
  else
    fail "eval on $np rank(s) (rc $RC): '$OUT' vs training '$trained'"$'\n'"$ERR"
  fi
done

# 2. --keep-best loss on a run that diverges (lr 0.5): best.h5 is the lowest-loss step, though
# keep-last 1 rotated that step's own file away; eval of best.h5 gives that loss.
run_mpi 2 300 "${CLS[@]}" --lr 0.5 --epochs 3 --eval-interval 4 --checkpoint-dir "$WORK/div" --keep-last 1 \
  --keep-best loss --metrics-file "$WORK/div.jsonl"
best_step=$(grep '"kind":"eval"' "$WORK/div.jsonl" | awk -F'"loss":' '{split($2, a, ","); split($0, s, "\"step\":");
  split(s[2], t, /[,}]/); if (n == 0 || a[1] < min) {min = a[1]; step = t[1]}; n++} END {print step}')
recorded=$(grep -o '"step":[0-9]*' "$WORK/div/best.json" 2>/dev/null | cut -d: -f2)
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ -n "$best_step" ] && [ "$recorded" = "$best_step" ] && [ -f "$WORK/div/best.h5" ] &&
  [ ! -e "$WORK/div/$(printf 'step-%08d.h5' "$best_step")" ]; then
  pass "--keep-best loss: best.h5 is step $best_step (lowest validation loss), kept outside keep-last 1"
else
  fail "--keep-best loss (rc $RC): best.json '$(cat "$WORK/div/best.json" 2>&1)', lowest loss at step '$best_step'"
fi
eval_run 2 --checkpoint "$WORK/div/best.h5"
expected=$(printf '%.6g' "$(metric_at "$WORK/div.jsonl" "$best_step" loss)")
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qx "validation loss: $expected" <<<"$OUT"; then
  pass "eval of best.h5: loss $expected, as validated at step $best_step"
else
  fail "eval of best.h5 (rc $RC): '$OUT', expected loss $expected"$'\n'"$ERR"
fi
# A resumed run (one more epoch) validates worse and leaves best.h5 alone.
before=$(cat "$WORK/div/best.json")
run_mpi 2 300 "${CLS[@]}" --lr 0.5 --epochs 4 --eval-interval 4 --checkpoint-dir "$WORK/div" --keep-last 1 \
  --keep-best loss --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(cat "$WORK/div/best.json")" = "$before" ] && grep -q "the best so far is" <<<"$ERR$OUT"; then
  pass "resumed: the best so far came from best.json and still holds"
else
  fail "resumed --keep-best (rc $RC): best.json '$(cat "$WORK/div/best.json")' was '$before'"$'\n'"$ERR"
fi

# 3. --keep-best accuracy: higher is better.
run_mpi 2 300 "${CLS[@]}" --lr 0.05 --epochs 2 --eval-interval 3 --checkpoint-dir "$WORK/acc" --keep-last 1 \
  --keep-best accuracy --metrics-file "$WORK/acc.jsonl"
best_acc=$(grep '"kind":"eval"' "$WORK/acc.jsonl" | grep -o '"accuracy":[0-9.e+-]*' | cut -d: -f2 | sort -g | tail -1)
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ -n "$best_acc" ] && grep -q "\"value\":$best_acc[,}]" "$WORK/acc/best.json"; then
  pass "--keep-best accuracy: best.json holds the highest accuracy, $best_acc"
else
  fail "--keep-best accuracy (rc $RC): best.json '$(cat "$WORK/acc/best.json" 2>&1)', highest $best_acc"
fi

# 4. Regression and lm (the vocabulary derived from the data, recorded in the checkpoint).
"$MNDDP_DATA_BIN" synth --task regression --targets 2 --shape 12 --out "$WORK/reg" --train-samples 1024 \
  --val-samples 200 --shards 2 >/dev/null
"$MNDDP_DATA_BIN" synth --task lm --vocab 40 --shape 17 --out "$WORK/lm" --train-samples 512 --val-samples 100 \
  --shards 2 >/dev/null
for task in reg lm; do
  if [ "$task" = reg ]; then extra=(--task regression --model mlp); else extra=(--task lm --model gpt --hidden 32 --heads 2); fi
  run_mpi 2 300 "${extra[@]}" --train-data "$WORK/$task/train_*.h5" --val-data "$WORK/$task/val_*.h5" \
    --optimizer adamw --lr 0.003 --max-steps 10 --checkpoint-dir "$WORK/$task-ck" --metrics-file ""
  trained=$(grep '^final validation' <<<"$OUT" | sed 's/^final //')
  eval_run 3 --checkpoint "$WORK/$task-ck"
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$trained" ] && [ "$OUT" = "$trained" ]; then
    pass "eval $task on 3 ranks = training's: $(tr '\n' ' ' <<<"$OUT")"
  else
    fail "eval $task (rc $RC): '$OUT' vs '$trained'"$'\n'"$ERR"
  fi
done

# 5. Errors: one line, exit 2.
eval_run 2 --val-data "$WORK/cls/val_*.h5"
expect_usage_error "eval without --checkpoint" "mnddp eval: --checkpoint PATH is needed"
eval_run 2 --checkpoint "$WORK/cls/val_000.h5"
expect_usage_error "eval of a data file" "--checkpoint '$WORK/cls/val_000.h5'" "not an mnddp checkpoint"
eval_run 2 --checkpoint "$WORK/nothing.h5"
expect_usage_error "eval of a missing file" "--checkpoint '$WORK/nothing.h5': no such file"
"$MNDDP_DATA_BIN" synth --out "$WORK/cls16" --train-samples 64 --val-samples 64 --shards 1 --shape 16 --classes 6 \
  >/dev/null
eval_run 2 --checkpoint "$WORK/run" --val-data "$WORK/cls16/val_*.h5"
expect_usage_error "eval on data of another shape" "--val-data: samples shaped [16]" "was trained on [32]"
run_mpi 2 60 "${CLS[@]}" --checkpoint-dir "$WORK/bad" --keep-best top1
expect_usage_error "--keep-best of no metric" "--keep-best top1: --task classification reports loss, accuracy, top5_accuracy"
run_mpi 2 60 "${CLS[@]}" --keep-best loss
expect_usage_error "--keep-best without a checkpoint directory" "--keep-best loss: needs --checkpoint-dir and --val-data"

finish
