# The watchdog times out a collective on a wedged device and the rank exits, however CUDA and NCCL
# hang (F3 of the GPU review): a completion probe that never returns, a health check that never
# returns (both now run on the watchdog's device prober, not on the thread that decides), an abort
# hook that never returns (abort_all's exit deadline). Each: exit code 4, the timeout's message,
# and well within the time a hang would take (the helper sleeps 120 s).
source "$(dirname "$0")/lib.sh"
: "${MNDDP_STUCK_BIN:?}"

for mode in probe health hook; do
  start=$SECONDS
  timeout -k 5 90 "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_STUCK_BIN" "$mode" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  elapsed=$((SECONDS - start))
  check "$mode: exit code 4 (got $rc after ${elapsed} s)" test "$rc" = 4
  # 2 s timeout, 3 s for the others' answers, 5 s for their records, 20 s abort deadline (hook).
  check "$mode: ended within 45 s (took ${elapsed} s)" test "$elapsed" -le 45
  check "$mode: the watchdog named the stuck collective" grep -q "collective timeout: allreduce #1" "$WORK/err"
  if [ "$mode" = hook ]; then
    check "hook: the exit deadline said why" grep -q "did not finish shutting down within 20 s" "$WORK/err"
  fi
done
finish
