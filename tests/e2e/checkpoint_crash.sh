# Crash safety of checkpoints on 2 ranks: every rank SIGKILLed in the middle of a checkpoint write
# (--inject-fault checkpoint-kill: the deterministic mid-write case), killed from outside at an
# arbitrary moment, a write failing on one rank, a full disk before and during the write. Each time
# `latest` still names a valid checkpoint, nothing half-written is used, and resume works.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 1024 --val-samples 64 --shards 2 --shape 16 >/dev/null
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --batch-size 8 --epochs 2
  --checkpoint-interval 10 --metrics-file "")

latest_is_valid() {  # latest_is_valid DIR: `latest` names a checkpoint whose every checksum matches
  "$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/data_tools/load_checkpoint.py" "$1/$(cat "$1/latest")" --verify
}

check() {  # check NAME COMMAND...
  local name=$1
  shift
  CASES=$((CASES + 1))
  if "$@" >"$WORK/check.out" 2>&1; then pass "$name: $(tail -1 "$WORK/check.out")"; else fail "$name: $(cat "$WORK/check.out")"; fi
}

run_mpi 2 120 "${BASE[@]}" --checkpoint-dir "$WORK/straight"

# 1. Every rank killed midway through writing step 30's checkpoint.
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/kill" --inject-fault checkpoint-kill@30
CASES=$((CASES + 1))
if [ "$RC" != 0 ] && [ "$(cat "$WORK/kill/latest")" = "step-00000020.h5" ] && compgen -G "$WORK/kill/step-00000030.h5.????????????????.tmp" >/dev/null; then
  pass "SIGKILL mid-write: the job ended (rc $RC), latest still names step 20, the half-written file is a .tmp"
else
  fail "SIGKILL mid-write: rc $RC, latest $(cat "$WORK/kill/latest" 2>/dev/null), files: $(ls "$WORK/kill")"
fi
check "after the kill, latest is valid" latest_is_valid "$WORK/kill"
run_mpi 2 120 "${BASE[@]}" --checkpoint-dir "$WORK/kill"
CASES=$((CASES + 1))
if ! compgen -G "$WORK/kill/*.tmp" >/dev/null && grep -q "removing '.*step-00000030.h5.*.tmp', left by a checkpoint write" <<<"$OUT$ERR"; then
  pass "the next run removed the dead run's temporary"
else
  fail "the dead run's temporary: $(ls "$WORK/kill")"
fi
check "resuming after the kill ends identical to an uninterrupted run" \
  "${COMPARE[@]}" "$WORK/kill/$(cat "$WORK/kill/latest")" "$WORK/straight/$(cat "$WORK/straight/latest")"

# 2. The write fails on one rank: nobody commits, every rank reports it, latest is unchanged.
run_mpi 2 60 "${BASE[@]}" --checkpoint-dir "$WORK/fail" --inject-fault checkpoint-fail@30:1
CASES=$((CASES + 1))
if [ "$RC" = 1 ] && [ "$(grep -c 'mnddp: error:' <<<"$ERR")" = 1 ] && grep -q "checkpoint of step 30 not written" <<<"$ERR" &&
  [ "$(cat "$WORK/fail/latest")" = "step-00000020.h5" ] && ! compgen -G "$WORK/fail/*tmp*" >/dev/null; then
  pass "a write failing on rank 1: one message, exit 1, no commit, no .tmp left"
else
  fail "failing write: rc $RC, $(ls "$WORK/fail"), $ERR"
fi

# 3. From outside: kill -9 every rank at an arbitrary moment of a run that checkpoints every step.
# Where the kill lands is chance (often between writes): this is the realistic case, not the
# mid-write test, which is case 1's checkpoint-kill.
merge_options --threads 1 "${BASE[@]}" --epochs 50 --checkpoint-interval 1 --hidden 512 --layers 3 \
  --checkpoint-dir "$WORK/outside"
"$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}" >/dev/null 2>&1 &
launcher=$!
for _ in $(seq 100); do [ -e "$WORK/outside/latest" ] && break; sleep 0.1; done
sleep 1.3
pkill -9 -P "$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null
check "after kill -9 from outside at an arbitrary moment (not necessarily mid-write), latest is valid" \
  latest_is_valid "$WORK/outside"
run_mpi 2 120 "${BASE[@]}" --hidden 512 --layers 3 --checkpoint-dir "$WORK/outside" --steps-per-run 3
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "resumed from" <<<"$OUT"; then pass "resume after kill -9 works"; else fail "resume after kill -9: rc $RC $ERR"; fi

# 4. A full disk: the checkpoint directory on a 16 MiB tmpfs (in a private mount namespace) holds the
# first 4.3 MB checkpoint but not room enough for the second.
if unshare -m true 2>/dev/null; then
  mkdir -p "$WORK/small"
  export WORK
  # The run goes in as arguments, so globs and spaces reach mnddp unexpanded.
  unshare -m bash -c 'mount -t tmpfs -o size=16m tmpfs "$1" && shift && timeout 60 "$@" >"$WORK/full.out" \
      2>"$WORK/full.err"; echo $? >"$WORK/full.rc"; cp -r "$WORK/small/ck" "$WORK/full-ck"' \
    _ "$WORK/small" "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train --threads 1 "${BASE[@]}" --hidden 512 \
    --layers 3 --checkpoint-dir "$WORK/small/ck" --keep-last 3  # BASE has none of these: no repeat
  rc=$(cat "$WORK/full.rc")
  CASES=$((CASES + 1))
  if [ "$rc" = 1 ] && grep -q "not written" "$WORK/full.err" && [ "$(grep -c 'mnddp: error:' "$WORK/full.err")" = 1 ]; then
    pass "full disk: exit 1 with one message: $(grep -m1 'mnddp: error:' "$WORK/full.err" | cut -c1-160)"
  else
    fail "full disk: rc $rc: $(cat "$WORK/full.err" | tail -3)"
  fi
  check "after the full disk, latest is valid" latest_is_valid "$WORK/full-ck"

  # 5. The disk fills *during* the write (after the free-space check; real ENOSPC from tmpfs on rank
  # 1's data write): one message naming the cause, step 10 still valid, and once space is freed the
  # run resumes from it.
  mkdir -p "$WORK/filling"
  unshare -m bash -c 'mount -t tmpfs -o size=64m tmpfs "$1" && shift && timeout 60 "$@" >"$WORK/fill.out" \
      2>"$WORK/fill.err"; echo $? >"$WORK/fill.rc"; cp -r "$WORK/filling/ck" "$WORK/fill-ck"; rm -f "$WORK/fill-ck/injected-fill"' \
    _ "$WORK/filling" "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train --threads 1 "${BASE[@]}" --hidden 512 \
    --layers 3 --checkpoint-dir "$WORK/filling/ck" --inject-fault checkpoint-fill@20:1
  rc=$(cat "$WORK/fill.rc")
  CASES=$((CASES + 1))
  line=$(grep -m1 'mnddp: error:' "$WORK/fill.err")
  if [ "$rc" = 1 ] && [ "$(grep -c 'mnddp: error:' "$WORK/fill.err")" = 1 ] && grep -q "no space left" <<<"$line" &&
    grep -q "step 20 not written" <<<"$line" && [ "$(cat "$WORK/fill-ck/latest")" = "step-00000010.h5" ] &&
    ! compgen -G "$WORK/fill-ck/*tmp*" >/dev/null; then
    pass "disk full mid-write: exit 1, one message: $(cut -c1-170 <<<"$line")"
  else
    fail "disk full mid-write: rc $rc, files $(ls "$WORK/fill-ck" | tr '\n' ' '): $(tail -3 "$WORK/fill.err")"
  fi
  check "after the disk filled mid-write, latest is valid" latest_is_valid "$WORK/fill-ck"
  run_mpi 2 120 "${BASE[@]}" --hidden 512 --layers 3 --checkpoint-dir "$WORK/fill-ck" --steps-per-run 5
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && grep -q "resumed from.*step-00000010.h5" <<<"$OUT$ERR"; then pass "resume after the full disk works"
  else fail "resume after the full disk: rc $RC $ERR"; fi
else
  echo "skip: full-disk case needs mount namespaces (unshare -m), not available here"
fi
finish
