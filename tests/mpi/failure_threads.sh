# Every thread of a failing rank at once (tests/mpi/failure_threads.cpp), on 2 ranks: a clean run,
# a rank that stops mid-run with a commit in flight, and a rank whose loader throws. Each must end
# in time with its exit code, a record from each rank with its cause, and a checkpoint that verifies.
# Usage: failure_threads.sh PROGRAM (ctest; MNDDP_TEST_TIME_SCALE stretches the deadlines).
set -uo pipefail
program=${1:?usage: failure_threads.sh PROGRAM}
mpiexec=${MPIEXEC:-mpirun}
scale=${MNDDP_TEST_TIME_SCALE:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-threads.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
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

# causes FILE: "rank:cause" of each record, sorted.
causes() {
  python3 -c 'import json,sys
print(" ".join(sorted("%d:%s" % (r["rank"], r["cause"]) for r in map(json.loads, open(sys.argv[1])) if "cause" in r)))' "$1"
}

# expect MODE RC CAUSES NEEDLE: the run ended with RC in time, its records are CAUSES, stderr has NEEDLE,
# and its newest checkpoint verifies.
expect() {
  local mode=$1 want_rc=$2 want_causes=$3 needle=$4
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then fail "$mode: hung (killed after ${elapsed}s)"$'\n'"$err"; return; fi
  if [ "$rc" != "$want_rc" ]; then fail "$mode: exit code $rc, expected $want_rc"$'\n'"$err"; return; fi
  local got=""
  [ -f "$dir/incident.jsonl" ] && got=$(causes "$dir/incident.jsonl")
  if [ "$got" != "$want_causes" ]; then fail "$mode: records '$got', expected '$want_causes'"$'\n'"$err"; return; fi
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

[ "$failures" = 0 ] && echo "all 3 cases passed" || echo "$failures of 3 cases failed"
[ "$failures" = 0 ]
