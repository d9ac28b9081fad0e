# Every injected fault (--inject-fault) and an external kill -9 end the job with a non-zero exit
# within --collective-timeout + 15 s, with one line that names the fault and the rank; a slow rank
# is not mistaken for a hung one; a corrupt newest checkpoint makes resume fall back.
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 1024 --val-samples 64 --shards 2 --shape 16 >/dev/null
TIMEOUT=5
# The 15 s to end (incident records, stacks, the launcher's teardown) stretch in an instrumented
# build (MNDDP_TEST_TIME_SCALE, scripts/asan.sh); the collective timeout does not.
DEADLINE=$((TIMEOUT + 15 * ${MNDDP_TEST_TIME_SCALE:-1}))
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --batch-size 8 --epochs 2
  --metrics-file "" --collective-timeout "$TIMEOUT")

# expect_fault NAME CODE NEEDLE... : the last run ended in time with exit code CODE ("nonzero": any
# but 0) and one line of stderr holds every NEEDLE.
expect_fault() {
  local name=$1 code=$2
  shift 2
  CASES=$((CASES + 1))
  if [ "$RC" = 124 ] || [ "$RC" = 137 -a "$code" != nonzero ]; then fail "$name: hung (killed after ${DEADLINE}s)"; return; fi
  if [ "$code" = nonzero ] && [ "$RC" = 0 ]; then fail "$name: exit code 0"; return; fi
  if [ "$code" != nonzero ] && [ "$RC" != "$code" ]; then fail "$name: exit code $RC, expected $code"$'\n'"$ERR"; return; fi
  if [ "$ELAPSED" -gt "$DEADLINE" ]; then fail "$name: took ${ELAPSED}s (deadline ${DEADLINE}s)"; return; fi
  local line=$ERR
  for needle in "$@"; do line=$(grep -F -- "$needle" <<<"$line"); done
  if [ -z "$line" ]; then fail "$name: no line with all of: $*"$'\n'"$ERR"; return; fi
  pass "$name (rc $RC, ${ELAPSED}s): $(head -1 <<<"$line" | cut -c1-220)"
}

run_mpi 3 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault crash@20:1
expect_fault "crash of rank 1" nonzero "injected fault crash@20:1" "rank 1@"

run_mpi 3 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault hang@20:1
expect_fault "hang of rank 1" 4 "mnddp: fatal: collective timeout" "rank 1 never reached it" "gradient bucket"

# Every rank inside a call that never completes (a stuck network): each rank's watchdog times out
# within a second of the others', so they question each other at once, and every one must answer.
run_mpi 3 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault stall@20
expect_fault "stall of every rank" 4 "mnddp: fatal: collective timeout" "injected-stall channel" \
  "every rank is inside it (ranks 0, 1, 2): a stuck network or device"

# A stack overflow: the crash handler runs on its alternate stack, so the rank still says what happened.
run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault stack-overflow@20:1
expect_fault "stack overflow on rank 1" nonzero "rank 1@" "mnddp: fatal: SIGSEGV"

# A rank stuck in the file system inside a checkpoint write (after the file is created): watched
# like any collective, with the write's step in the verdict; with the commit beside training or not.
for async in true false; do
  run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --checkpoint-dir "$WORK/ck-stall-$async" --checkpoint-interval 2 \
    --checkpoint-async "$async" --inject-fault checkpoint-stall@4:1
  expect_fault "rank 1 stalled in the checkpoint write (--checkpoint-async $async)" 4 \
    "mnddp: fatal: collective timeout" "checkpoint write of step 4" "rank 1 never reached it"
done

run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault loader-exception@20:1
expect_fault "exception in rank 1's loader thread" 1 "mnddp: fatal:" "loader-exception@20:1" "rank 1"

run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault nan-loss@20:1
expect_fault "NaN loss on rank 1, --on-nonfinite abort" 1 "mnddp: error: step 20: NaN/Inf" "nan on rank 1"
CASES=$((CASES + 1))
if [ "$(grep -c 'mnddp: error:' <<<"$ERR")" = 1 ]; then pass "NaN abort: one message"; else fail "NaN abort: $ERR"; fi

# The same with AdamW, whose one pass finds the NaN (no separate scan of the gradients).
run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --optimizer adamw --lr 1e-3 --inject-fault nan-loss@20:1
expect_fault "NaN loss on rank 1 under AdamW, --on-nonfinite abort" 1 "mnddp: error: step 20: NaN/Inf" "nan on rank 1"

run_mpi 2 60 "${BASE[@]}" --inject-fault nan-loss@20:1 --on-nonfinite skip
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(grep -c 'step skipped (--on-nonfinite skip)' <<<"$OUT$ERR")" = 1 ]; then
  pass "NaN loss with --on-nonfinite skip: one warning, the run finishes"
else
  fail "NaN skip: rc $RC"$'\n'"$ERR"
fi

run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault desync@20:1 --log-interval 1 --debug-collectives true
expect_fault "desync with --debug-collectives" 4 "mnddp: error: collectives out of step" \
  "(training metrics) but rank 1 calls allreduce" "(stray all-reduce (injected desync))"

# The always-on checks, at their defaults: a call the others did not make (same size: MPI sees
# nothing), and a replica whose parameters drifted by one bit.
run_mpi 3 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault desync@25:1
expect_fault "desync caught by the always-on sequence check" 4 \
  "mnddp: error: ranks out of step: their collective call sequences differ (rank 1 differs from the other 2)" \
  "rank 1 called allreduce" "stray all-reduce (injected desync)" "found at the check of step 40"

run_mpi 3 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault replica-drift@20:1
expect_fault "replica drift caught by the parameter check" 4 \
  "mnddp: error: replicas differ: the parameters are no longer identical on every rank (rank 1 differs from" \
  "found at the check of step 84"

# Checked every interval, the drift is found at the first interval after it.
run_mpi 2 $((DEADLINE + 5)) "${BASE[@]}" --inject-fault replica-drift@20:0 --check-replicas-every 1
expect_fault "replica drift with --check-replicas-every 1" 4 "replicas differ" "no majority: rank 0 | rank 1" \
  "found at the check of step 20; the previous one, at step 10, agreed"

# A slow rank (0.5 s a step) stays under the timeout: not a hang, the run completes.
run_mpi 2 60 "${BASE[@]}" --inject-fault slow@120:1 --collective-timeout 2
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && ! grep -q "collective timeout" <<<"$ERR"; then pass "slow rank: no false alarm, finished"
else fail "slow rank: rc $RC"$'\n'"$ERR"; fi

# Straggler blame: a rank that sleeps 0.5 s before every step is named, with its lateness put before
# its batch was ready, in every interval and in the summary; a clean run names no rank.
run_mpi 2 60 "${BASE[@]}" --val-data "" --inject-fault slow@1:1 --max-steps 20 --log-interval 4
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(grep -c 'straggler rank 1 (' <<<"$OUT")" = 5 ] &&
  grep -qE "straggler      rank 1 \(.*\): the last to its first collective in 5 of 5 intervals, (4[5-9]|5[0-4])[0-9]\.[0-9]+ ms a step after the earliest rank \(against the others' mean: before its batch was ready \+(4[5-9]|5[0-4])[0-9]\." <<<"$OUT"; then
  pass "slow rank named as the straggler: $(grep -o 'straggler      rank.*' <<<"$OUT" | cut -c1-200)"
else
  fail "slow rank not named as the straggler: rc $RC"$'\n'"$OUT"
fi
# A model with BatchNorm broadcasts its buffers at the start of every step: the ranks meet there, not
# at the first gradient bucket. Rank 0, the broadcast's root, slow.
"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 256 --val-samples 0 --shards 2 --shape 3,16,16 >/dev/null
run_mpi 2 60 --train-data "$WORK/img/train_*.h5" --val-data "" --model convnet --batch-size 8 --max-steps 12 \
  --log-interval 4 --metrics-file "" --inject-fault slow@1:0
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qE "straggler      rank 0 \(.*\): the last to its first collective in 3 of 3 intervals, (4[5-9]|5[0-4])[0-9]\." <<<"$OUT"; then
  pass "slow rank 0 of a BatchNorm model named: $(grep -o 'straggler      rank.*' <<<"$OUT" | cut -c1-120)"
else
  fail "slow rank 0 of a BatchNorm model not named: rc $RC"$'\n'"$OUT"
fi

run_mpi 2 60 "${BASE[@]}" --val-data "" --max-steps 100
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "straggler      none: no rank was the last" <<<"$OUT"; then
  pass "a clean run names no straggler ($(grep -c 'straggler rank' <<<"$OUT") of 10 intervals flagged)"
else
  fail "a clean run named a straggler: rc $RC"$'\n'"$OUT"
fi

# Corrupt newest checkpoint: the next run warns and resumes from the one before.
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/ck" --checkpoint-interval 10 --max-steps 30 \
  --inject-fault checkpoint-corrupt@30
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/ck" --checkpoint-interval 10 --max-steps 40
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "step-00000030.h5' is not usable.*corrupt" <<<"$OUT$ERR" &&
  grep -q "resumed from '.*step-00000020.h5': step 20" <<<"$OUT$ERR" && [ -e "$WORK/ck/step-00000030.h5.corrupt" ]; then
  pass "corrupt newest checkpoint: set aside as step-00000030.h5.corrupt, resume fell back to step 20"
else
  fail "corrupt checkpoint fallback: rc $RC"$'\n'"$ERR"
fi

# External kill -9 of one random rank, mid-run: every rank ends.
merge_options --threads 1 "${BASE[@]}" --epochs 1000 --log-interval 1
"$MPIEXEC" -np 3 --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}" >"$WORK/kill.out" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "step 5/" "$WORK/kill.out" 2>/dev/null && break; sleep 0.1; done
mapfile -t ranks < <(pgrep -f "mnddp train" -P "$launcher")
victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
start=$SECONDS
kill -9 "$victim"
for _ in $(seq "$DEADLINE"); do kill -0 "$launcher" 2>/dev/null || break; sleep 1; done
CASES=$((CASES + 1))
if kill -0 "$launcher" 2>/dev/null; then
  fail "kill -9 of rank pid $victim: the job still runs after ${DEADLINE}s"
  pkill -9 -P "$launcher"
else
  wait "$launcher"
  pass "kill -9 of one of ${#ranks[@]} ranks (pid $victim): the job ended in $((SECONDS - start))s, rc $?"
fi
finish
