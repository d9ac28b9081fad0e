# The fault matrix: every injected fault against every checkpoint state, on 1 and 2 ranks.
#   faults: nan-loss, loader-exception, crash (a real SIGSEGV), hang, stall (every rank inside a call
#           that never completes), external kill -9;
#   states: none (no checkpoints), sync (a commit every step, training waits for it), async (a commit
#           every step, in flight beside training when the fault strikes), zero (ZeRO-2: every rank's
#           optimizer shares in flight);
# on rank NP-1 of NP (stall: every rank). Each case must end in time with the fault's own exit code
# and message, an incident record from every rank still alive with the fault's verdict, and, with
# checkpoints, a `latest` that a resumed run loads. docs/FAULT_TOLERANCE.md shows the table.
# MNDDP_MATRIX_RANKS / MNDDP_MATRIX_FAULTS / MNDDP_MATRIX_STATES narrow it (space-separated).
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 1024 --val-samples 0 --shards 2 --shape 16 >/dev/null
TIMEOUT=3
STEP=12
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "" --batch-size 8 --max-steps 40 --log-interval 1
  --metrics-file "" --collective-timeout "$TIMEOUT")
# A hang with no collective open (one rank) is found by the progress check: the timeout and its grace.
DEADLINE=$((TIMEOUT + 15 + 15 * ${MNDDP_TEST_TIME_SCALE:-1}))

state_options() {
  case $1 in
    none) echo "" ;;
    sync) echo "--checkpoint-dir $2 --checkpoint-interval 1 --checkpoint-async false" ;;
    async) echo "--checkpoint-dir $2 --checkpoint-interval 1 --checkpoint-async true" ;;
    zero) echo "--checkpoint-dir $2 --checkpoint-interval 1 --checkpoint-async true --zero 2" ;;
  esac
}

# The exit code, a needle of the fault's message, and a pattern its verdict must match.
expected() {
  local fault=$1 np=$2 rank=$3
  case $fault in
    nan-loss) echo "1|step $STEP: NaN/Inf|step $STEP.*(NaN|nan)" ;;
    loader-exception) echo "1|injected fault loader-exception@$STEP:$rank|loader-exception@$STEP:$rank" ;;
    crash) echo "nonzero|mnddp: fatal: SIGSEGV|rank $rank crashed at step $STEP" ;;
    hang) if [ "$np" = 1 ]; then echo "4|no progress|no progress"; else echo "4|rank $rank never reached it|rank $rank never entered"; fi ;;
    stall) echo "4|injected-stall channel|inside .*injected.stall" ;;
    kill) if [ "$np" = 1 ]; then echo "nonzero||"; else echo "nonzero||rank $rank wrote no record"; fi ;;
  esac
}

# Runs one case; sets RC, ERR, ELAPSED. The kill case is a run killed from outside at step STEP.
run_case() {
  local np=$1 fault=$2 rank=$3 incident=$4
  shift 4
  if [ "$fault" != kill ]; then
    local spec="$fault@$STEP:$rank"
    [ "$fault" = stall ] && spec="stall@$STEP"
    [ "$fault" = crash ] && spec="segfault@$STEP:$rank"
    MNDDP_INCIDENT_FILE=$incident run_mpi "$np" $((DEADLINE + 5)) "${BASE[@]}" "$@" --inject-fault "$spec"
    return
  fi
  merge_options --threads 1 "${BASE[@]}" "$@" --max-steps 100000 --epochs 100000
  local start=$SECONDS
  MNDDP_INCIDENT_FILE=$incident "$MPIEXEC" --mca odls_base_sigkill_timeout 5 -np "$np" --oversubscribe \
    "$MNDDP_BIN" train "${MERGED[@]}" >"$WORK/kill.out" 2>&1 &
  local launcher=$! victim=
  for _ in $(seq 300); do grep -q "step $STEP/" "$WORK/kill.out" 2>/dev/null && break; sleep 0.1; done
  for pid in $(pgrep -f "mnddp train" -P "$launcher"); do
    grep -qaxz "OMPI_COMM_WORLD_RANK=$rank" "/proc/$pid/environ" 2>/dev/null && victim=$pid
  done
  start=$SECONDS
  kill -0 "$launcher" 2>/dev/null || victim=  # it ended before the step: nothing to kill
  [ -n "$victim" ] && kill -9 "$victim"
  for _ in $(seq "$DEADLINE"); do kill -0 "$launcher" 2>/dev/null || break; sleep 1; done
  kill -9 "$launcher" 2>/dev/null && RC=124
  wait "$launcher"
  [ "${RC:-}" = 124 ] || RC=$?
  [ -n "$victim" ] || RC=0  # never reached the step: reported as a failure below
  ELAPSED=$((SECONDS - start))
  ERR=$(cat "$WORK/kill.out")
}

# The ranks with a record in FILE (withdrawn ones are no record).
ranks_recorded() {
  "$MNDDP_PYTHON" - "$1" <<'EOF'
import json, sys
ranks = set()
for line in open(sys.argv[1], errors="replace"):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    if not record.get("withdrawn"):
        ranks.add(record.get("rank"))
print(len(ranks))
EOF
}

# One case, in a directory of its own (run_mpi writes under $WORK); its verdict line goes to
# $RESULT_DIR/NAME: "ok: ..." or "FAIL: ...", then its table row.
one_case() {
  local np=$1 state=$2 fault=$3 rank=$(($1 - 1))
  local name="np=$np $fault/$state" id="$np-$state-$fault"
  WORK="$WORK/case-$id"
  mkdir -p "$WORK"
  local dir="$WORK/ck" incident="$WORK/incident.jsonl" code needle verdict
  IFS='|' read -r code needle verdict <<<"$(expected "$fault" "$np" "$rank")"
  # shellcheck disable=SC2046  # the state's options are words
  run_case "$np" "$fault" "$rank" "$incident" $(state_options "$state" "$dir")
  local case_rc=$RC case_elapsed=$ELAPSED case_err=$ERR problem=
  if [ "$RC" = 124 ] || [ "$RC" = 137 -a "$code" != nonzero ] || [ "$ELAPSED" -gt "$DEADLINE" ]; then
    problem="did not end in time (rc $RC, ${ELAPSED}s)"
  elif [ "$fault" = kill ] && [ "$RC" = 0 ]; then
    problem="never reached step $STEP to be killed"
  elif { [ "$code" = nonzero ] && [ "$RC" = 0 ]; } || { [ "$code" != nonzero ] && [ "$RC" != "$code" ]; }; then
    problem="exit code $RC, expected $code"
  elif [ -n "$needle" ] && ! grep -qF -- "$needle" <<<"$ERR"; then
    problem="no line with '$needle'"
  fi
  local live=$np records=0
  [ "$fault" = kill ] && live=$((np - 1))
  [ -s "$incident" ] && records=$(ranks_recorded "$incident")
  if [ -z "$problem" ] && [ "$records" != "$live" ]; then problem="$records ranks wrote a record, $live live"; fi
  if [ -z "$problem" ] && [ -n "$verdict" ]; then
    local text
    text=$("$MNDDP_BIN" incident "$incident" 2>&1)
    local verdict_line
    verdict_line=$(grep '^verdict: ' <<<"$text")
    grep -qE -- "$verdict" <<<"$verdict_line" ||
      problem="verdict does not match /$verdict/: $(grep -m1 '^verdict' <<<"$text")"
  fi
  local loaded=- latest
  if [ -z "$problem" ] && [ "$state" != none ]; then
    latest=$(cat "$dir/latest" 2>/dev/null)
    # shellcheck disable=SC2046
    run_mpi "$np" 60 "${BASE[@]}" $(state_options "$state" "$dir") --max-steps $((STEP + 1)) --resume auto
    if [ -z "$latest" ]; then problem="no latest"
    elif [ "$RC" != 0 ] || ! grep -q "resumed from '.*$latest'" <<<"$OUT$ERR"; then
      problem="latest ($latest) did not load: rc $RC"$'\n'"$ERR"
    else loaded=$latest; fi
  fi
  if [ -z "$problem" ]; then
    echo "ok:   $name: rc $case_rc in ${case_elapsed}s, records from $records of $live live ranks, latest loads: $loaded"
    echo "| $np | $fault | $state | $case_rc | ${case_elapsed} s | $records/$live | $loaded |"
  else
    echo "FAIL: $name: $problem"$'\n'"$(tail -5 <<<"$case_err")"
    echo "| $np | $fault | $state | $case_rc | ${case_elapsed} s | $records/$live | FAILED |"
  fi
}

# The cases run MNDDP_MATRIX_JOBS at a time (default 3): most of a case is waiting (a timeout, a
# launcher's kill delay), not computing. The deadlines allow for the load.
RESULT_DIR="$WORK/results"
mkdir -p "$RESULT_DIR"
n=0
for np in ${MNDDP_MATRIX_RANKS:-1 2}; do
  for state in ${MNDDP_MATRIX_STATES:-none sync async zero}; do
    for fault in ${MNDDP_MATRIX_FAULTS:-nan-loss loader-exception crash hang stall kill}; do
      while [ "$(jobs -rp | wc -l)" -ge "${MNDDP_MATRIX_JOBS:-3}" ]; do wait -n; done
      n=$((n + 1))
      one_case "$np" "$state" "$fault" >"$RESULT_DIR/$(printf %02d $n)" 2>&1 &
    done
  done
done
wait
RESULTS=()
for result in "$RESULT_DIR"/*; do
  CASES=$((CASES + 1))
  grep -v '^|' "$result"
  grep -q '^FAIL' "$result" && FAILURES=$((FAILURES + 1))
  RESULTS+=("$(grep '^|' "$result")")
done
printf '%s\n' "| ranks | fault | checkpoint state | exit | ended after | records | latest loads |" "|---|---|---|---|---|---|---|" \
  "${RESULTS[@]}"
finish
