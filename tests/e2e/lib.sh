# Helpers for the end-to-end tests: run a command with a deadline and check how it ended.
# Expects MNDDP_BIN, MNDDP_DATA_BIN and MPIEXEC from CTest (tests/CMakeLists.txt).
set -uo pipefail

: "${MNDDP_BIN:?}" "${MNDDP_DATA_BIN:?}" "${MPIEXEC:=mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-e2e.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
# A failing run's incident records go to the test's own directory, not the test runner's.
export MNDDP_INCIDENT_FILE="$WORK/incident.jsonl"
FAILURES=0
CASES=0

fail() { printf 'FAIL: %s\n' "$*"; FAILURES=$((FAILURES + 1)); }
pass() { printf 'ok:   %s\n' "$*"; }
# check NAME COMMAND...: one case, passed when COMMAND succeeds (its output shown when it fails).
check() {
  local name=$1
  shift
  CASES=$((CASES + 1))
  if "$@" >"$WORK/check.out" 2>&1; then pass "$name"; else fail "$name: $(cat "$WORK/check.out")"; fi
}

# merge_options ARGS...: sets MERGED to ARGS with every option once, its last value winning. mnddp
# refuses an option given twice; the tests build a run from a base list and overrides after it.
# An option's value is the next word unless that starts with "--" (or it is --name=value).
merge_options() {
  local args=("$@") order=() i=0 name
  local -A value=() form=()
  while ((i < ${#args[@]})); do
    name=${args[i]}
    if [[ $name == --*=* ]]; then
      value[${name%%=*}]=${name#*=}
      form[${name%%=*}]=eq
      name=${name%%=*}
      i=$((i + 1))
    elif [[ $name == --* ]] && ((i + 1 < ${#args[@]})) && [[ ${args[i + 1]} != --* ]]; then
      value[$name]=${args[i + 1]}
      form[$name]=pair
      i=$((i + 2))
    else
      value[$name]=
      form[$name]=flag
      i=$((i + 1))
    fi
    [[ " ${order[*]} " == *" $name "* ]] || order+=("$name")
  done
  MERGED=()
  for name in "${order[@]}"; do
    case ${form[$name]} in
      eq) MERGED+=("$name=${value[$name]}") ;;
      pair) MERGED+=("$name" "${value[$name]}") ;;
      flag) MERGED+=("$name") ;;
    esac
  done
}

# run_mpi NP SECONDS args... : mnddp train under mpirun; sets RC, OUT (stdout), ERR (stderr), ELAPSED.
# The args are merged (merge_options): a later option overrides an earlier one.
# Deadlines stretch by MNDDP_TEST_TIME_SCALE (scripts/asan.sh sets it: instrumented runs are slower).
run_mpi() {
  local np=$1 seconds=$(($2 * ${MNDDP_TEST_TIME_SCALE:-1}))
  shift 2
  merge_options --threads 1 "$@"
  local start=$SECONDS
  timeout --kill-after=5 "$seconds" "$MPIEXEC" -np "$np" --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}" \
    >"$WORK/out" 2>"$WORK/err"
  RC=$?
  ELAPSED=$((SECONDS - start))
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# Counts a case; true when the last run ended in time with exit code 2 (else records the failure).
ended_with_usage_code() {
  CASES=$((CASES + 1))
  if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then fail "$1: hung (killed after the deadline)"; return 1; fi
  if [ "$RC" != 2 ]; then fail "$1: exit code $RC, expected 2"$'\n'"$ERR"; return 1; fi
}

# expect_usage_error NAME NEEDLE... : the last run ended with exit 2 in time, printing exactly one
# "mnddp: error:" line that contains every NEEDLE.
expect_usage_error() {
  local name=$1
  shift
  ended_with_usage_code "$name" || return
  local lines
  lines=$(grep -c 'mnddp: error:' <<<"$ERR")
  if [ "$lines" != 1 ]; then fail "$name: $lines error lines, expected exactly 1"$'\n'"$ERR"; return; fi
  local line
  line=$(grep 'mnddp: error:' <<<"$ERR")
  for needle in "$@"; do
    if ! grep -qF -- "$needle" <<<"$line"; then fail "$name: message lacks '$needle': $line"; return; fi
  done
  pass "$name (${ELAPSED}s): $line"
}

# expect_rank_failure NAME NEEDLE... : an error found by one rank mid-run (not agreed by all):
# exit code 2 in time, through abort_all ("[rank r@host] mnddp: fatal: ..." with every NEEDLE).
expect_rank_failure() {
  local name=$1
  shift
  ended_with_usage_code "$name" || return
  local line
  line=$(grep -m1 'mnddp: fatal:' <<<"$ERR")
  for needle in "$@"; do
    if ! grep -qF -- "$needle" <<<"$line"; then fail "$name: message lacks '$needle': $line"; return; fi
  done
  pass "$name (${ELAPSED}s): $line"
}

# round_trip NAME ARGS...: a 2-rank run of ARGS stopped every 6 steps (--steps-per-run) and resumed
# ends bitwise identical to an uninterrupted one (parameters, buffers, optimizer state, RNG) with the
# same loss log. Needs MNDDP_PYTHON and MNDDP_SOURCE_DIR (compare_checkpoints.py).
round_trip() {
  local name=$1
  shift
  local compare=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")
  run_mpi 2 300 "$@" --checkpoint-dir "$WORK/$name-straight" --metrics-file "$WORK/$name-straight.jsonl"
  [ "$RC" = 0 ] || fail "$name: straight run failed (rc $RC): $ERR"
  for _ in 1 2 3 4 5 6; do
    run_mpi 2 300 "$@" --checkpoint-dir "$WORK/$name-chunked" --metrics-file "$WORK/$name-chunked.jsonl" \
      --steps-per-run 6
    [ "$RC" = 0 ] || { fail "$name: chunked run failed (rc $RC): $ERR"; return; }
    grep -q "steps-per-run 6 reached" <<<"$OUT" || break
  done
  CASES=$((CASES + 1))
  local a="$WORK/$name-straight/$(cat "$WORK/$name-straight/latest")" b="$WORK/$name-chunked/$(cat "$WORK/$name-chunked/latest")"
  if "${compare[@]}" "$a" "$b" --metrics "$WORK/$name-straight.jsonl" "$WORK/$name-chunked.jsonl" >"$WORK/cmp" 2>&1; then
    pass "$name: resumed every 6 steps, bitwise identical to the uninterrupted run, same loss log"
  else
    fail "$name: $(cat "$WORK/cmp")"
  fi
}

finish() {
  echo "$((CASES - FAILURES)) passed, $FAILURES failed"
  [ "$FAILURES" = 0 ]
}
