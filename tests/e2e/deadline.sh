# A deadline without a signal (--deadline): a run whose job would be ended before it finishes takes
# its last checkpoint in time, exits with code 3, and its successor resumes from that checkpoint and
# ends bitwise identical to an uninterrupted run. (tests/slurm/deadline.sh does the same under a real
# Slurm time limit.)
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 512 --val-samples 0 --shards 2 --shape 16 >/dev/null
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "" --batch-size 8 --max-steps 24 --log-interval 4
  --checkpoint-interval 5)

run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/straight" --metrics-file "$WORK/straight.jsonl"
[ "$RC" = 0 ] || fail "the uninterrupted run failed (rc $RC): $ERR"

# Rank 1 sleeps 0.5 s a step: 24 steps would take 12 s, the job is given 6.
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/cut" --metrics-file "$WORK/cut.jsonl" --deadline 6 \
  --deadline-margin 1 --inject-fault slow@1:1
CASES=$((CASES + 1))
step=$(grep -o "checkpointing step [0-9]* now, while it still fits" <<<"$OUT" | grep -o "[0-9]*" | head -1)
if [ "$RC" = 3 ] && [ -n "$step" ] && [ "$ELAPSED" -le $((8 * ${MNDDP_TEST_TIME_SCALE:-1})) ] && [ "$(cat "$WORK/cut/latest")" = "$(printf 'step-%08d.h5' "$step")" ] &&
  grep -q "the job's end is near (--deadline): checkpointed at step $step; exiting with code 3" <<<"$OUT"; then
  pass "--deadline 6: checkpointed at step $step and exited with code 3 after ${ELAPSED}s"
else
  fail "--deadline 6: rc $RC after ${ELAPSED}s, step '$step'"$'\n'"$OUT$ERR"
fi

run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/cut" --metrics-file "$WORK/cut.jsonl" --deadline none
CASES=$((CASES + 1))
a="$WORK/straight/$(cat "$WORK/straight/latest")"
b="$WORK/cut/$(cat "$WORK/cut/latest")"
if [ "$RC" = 0 ] && grep -q "resumed from .*step-0*$step.h5" <<<"$OUT" &&
  "${COMPARE[@]}" "$a" "$b" --metrics "$WORK/straight.jsonl" "$WORK/cut.jsonl" >"$WORK/cmp" 2>&1; then
  pass "the successor resumed from step $step and ended bitwise identical to the uninterrupted run"
else
  fail "resume after the deadline: rc $RC: $(cat "$WORK/cmp" 2>/dev/null)"$'\n'"$OUT$ERR"
fi

# A margin larger than any clock (1e300 s is a valid value): the end is near from the first step.
# Counted in clock ticks, the margin overflowed and the deadline was never near: the run trained on.
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/huge" --metrics-file "" --deadline 1h --deadline-margin 1e300
CASES=$((CASES + 1))
if [ "$RC" = 3 ] && grep -q "the job's end is near (--deadline): checkpointed at step 1; exiting with code 3" <<<"$OUT"; then
  pass "--deadline-margin 1e300: checkpointed at step 1 and exited with code 3"
else
  fail "--deadline-margin 1e300: rc $RC"$'\n'"$OUT$ERR"
fi

# Refused values name the option.
run_mpi 2 20 "${BASE[@]}" --deadline 1h30
expect_usage_error "--deadline 1h30" "--deadline: '1h30' is not auto, none or a duration from 1 s to 10 years"
finish
