# Every thread of a failing rank at once (tests/mpi/failure_threads.cpp), on 2 ranks: a clean run,
# a rank that stops mid-run with a commit in flight, and a rank whose loader throws; on 3 ranks, every
# rank stuck in one call while one of them is frozen for 7 s, too slow to answer the others
# (a swapping or overloaded node). Each must end in time with its exit code, a record from each rank
# with its cause (the slow rank's too: no rank may end the job while another still writes), and a
# checkpoint that verifies.
# Usage: failure_threads.sh PROGRAM (ctest; MNDDP_TEST_TIME_SCALE stretches the deadlines).
set -uo pipefail
program=${1:?usage: failure_threads.sh PROGRAM}
mpiexec=${MPIEXEC:-mpirun}
scale=${MNDDP_TEST_TIME_SCALE:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-threads.XXXXXX")
CLEANUP_GROUP=""
trap '[ -n "$CLEANUP_GROUP" ] && rmdir "$CLEANUP_GROUP" 2>/dev/null; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
failures=0
fail() { printf 'FAIL: %s\n' "$*"; failures=$((failures + 1)); }
pass() { printf 'ok:   %s\n' "$*"; }

# run MODE SECONDS: 2 ranks in their own directory; sets rc, elapsed, err.
run() {
  local mode=$1 seconds=$(($2 * scale))
  dir=$work/$mode
  mkdir -p "$dir"
  local start=$SECONDS
  timeout --kill-after=5 "$seconds" "$mpiexec" -np 2 --oversubscribe "$program" "$mode" "$dir" >"$dir/out" 2>"$dir/err"
  rc=$?
  elapsed=$((SECONDS - start))
  err=$(cat "$dir/err")
}

# freeze PID SECONDS: holds every thread of PID for SECONDS in a cgroup freezer, as a node too loaded
# to run it would. Unlike SIGSTOP, which the launcher's kill sequence undoes with a SIGCONT, a frozen
# rank runs nothing, its signal handlers included, until thawed. False when no freezer is writable
# (not root, or no cgroup v1 freezer).
freeze() {
  local group=/sys/fs/cgroup/freezer/mnddp-threads-$$
  mkdir "$group" 2>/dev/null || return 1
  if ! echo "$1" >"$group/cgroup.procs" 2>/dev/null || ! echo FROZEN >"$group/freezer.state" 2>/dev/null; then
    rmdir "$group" 2>/dev/null
    return 1
  fi
  sleep "$2"
  echo THAWED >"$group/freezer.state"
  # The group empties when the job ends; the directory goes with the work directory's trap.
  CLEANUP_GROUP=$group
}

# run_frozen SECONDS: the stall mode on 3 ranks; the last rank is frozen from the moment it stalls
# until 7 s later, past the others' questions (3 s) and into their wait for its record (5 s).
# Sets rc, elapsed, err, and frozen (false when no freezer was available).
run_frozen() {
  dir=$work/stall
  mkdir -p "$dir"
  local start=$SECONDS pid="" polls=0
  timeout --kill-after=5 "$(($1 * scale))" "$mpiexec" -np 3 --oversubscribe "$program" stall "$dir" \
    >"$dir/out" 2>"$dir/err" &
  local job=$!
  while [ -z "$pid" ] && [ "$polls" -lt 1200 ] && kill -0 "$job" 2>/dev/null; do
    sleep 0.05
    polls=$((polls + 1))
    pid=$(cat "$dir/stalled.pid" 2>/dev/null)
  done
  frozen=false
  [ -n "$pid" ] && freeze "$pid" 7 && frozen=true
  wait "$job"
  rc=$?
  elapsed=$((SECONDS - start))
  err=$(cat "$dir/err")
}

# causes FILE: "rank:cause" of each record, sorted.
causes() {
  python3 -c 'import json,sys
print(" ".join(sorted("%d:%s" % (r["rank"], r["cause"]) for r in map(json.loads, open(sys.argv[1])) if "cause" in r)))' "$1"
}

# expect MODE RC CAUSES NEEDLE: the run ended with RC in time, its records match CAUSES (an extended
# regular expression for the whole list), stderr has NEEDLE, and its newest checkpoint verifies.
expect() {
  local mode=$1 want_rc=$2 want_causes=$3 needle=$4
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then fail "$mode: hung (killed after ${elapsed}s)"$'\n'"$err"; return; fi
  if [ "$rc" != "$want_rc" ]; then fail "$mode: exit code $rc, expected $want_rc"$'\n'"$err"; return; fi
  local got=""
  [ -f "$dir/incident.jsonl" ] && got=$(causes "$dir/incident.jsonl")
  if ! [[ "$got" =~ ^($want_causes)$ ]]; then fail "$mode: records '$got', expected '$want_causes'"$'\n'"$err"; return; fi
  if ! grep -qF -- "$needle" <<<"$err$(cat "$dir/out")"; then fail "$mode: no '$needle' in the output"$'\n'"$err"; return; fi
  local verified
  if ! verified=$(timeout 60 "$program" verify "$dir" 2>&1); then fail "$mode: $verified"; return; fi
  pass "$mode: exit $rc in ${elapsed}s, records '$got', ${verified#failure_threads: }"
}

run clean 60
expect clean 0 "" "clean: 24 steps"
run hang 60
expect hang 4 "0:timeout 1:request" "rank 1"
run error 60
expect error 1 "0:request 1:fatal" "injected loader exception"
# The frozen rank's record is the one rank 0 asked for, not one its launcher's SIGTERM forced out
# (which a loaded node loses to the SIGKILL that follows). Rank 1's may be either: it times out
# itself 0.25 s after rank 0 asks for it.
run_frozen 60
if [ "$frozen" = true ]; then
  expect stall 4 "0:timeout 1:(request|timeout) 2:request" "no answer within 3 s from rank(s) 2"
else
  echo "skip: stall: no writable cgroup freezer (/sys/fs/cgroup/freezer) to freeze a rank with"
fi

[ "$failures" = 0 ] && echo "all 4 cases passed" || echo "$failures of 4 cases failed"
[ "$failures" = 0 ]
