# What --resume does to the checkpoint directory, and what it must never do:
# 1. resuming from an older checkpoint sets the newer ones aside (renamed *.abandoned, a warning
#    naming them); the run's own checkpoints are kept by --keep-last without ever deleting the one
#    just written, `latest` names it, and --resume auto then continues this run, not the abandoned one;
# 2. a run resumed at its last step says it is complete, exits 0 and prints no made-up loss;
# 3. an I/O error reading the newest checkpoint (EIO, by LD_PRELOAD) stops --resume auto with a
#    message and leaves the file as it is (only a checksum or a broken structure sets a file aside),
#    and once the disk reads again the run resumes from that very checkpoint.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_EIO_PRELOAD:?set by ctest: the EIO shim (tests/support/eio_preload.c)}"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 512 --val-samples 64 --shards 2 --shape 12 \
  --classes 4 >/dev/null
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --num-classes 4 --batch-size 8
  --hidden 16 --epochs 100 --checkpoint-interval 10 --checkpoint-dir "$WORK/ck" --metrics-file "")
ck=$WORK/ck
listing() { ls "$ck" | tr '\n' ' '; }

check() {  # check NAME COMMAND...: one case, passed when COMMAND succeeds
  local name=$1
  shift
  CASES=$((CASES + 1))
  if "$@"; then pass "$name"; else fail "$name ($(listing))"; fi
}

run_mpi 2 60 "${BASE[@]}" --keep-last 5 --max-steps 50
check "first run: step 10..50 kept, latest names 50" test "$(cat "$ck/latest")" = step-00000050.h5 -a \
  -f "$ck/step-00000010.h5"

# 1. Resume from step 20 with --keep-last 2: 30, 40 and 50 belong to the abandoned run.
run_mpi 2 60 "${BASE[@]}" --resume "$ck/step-00000020.h5" --keep-last 2 --max-steps 30
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "set aside as step-00000030.h5.abandoned, step-00000040.h5.abandoned, step-00000050.h5.abandoned" <<<"$OUT"; then
  pass "resuming from step 20: the newer checkpoints were set aside, with a warning naming them"
else
  fail "resume from step 20: rc $RC; $(listing)"$'\n'"$OUT"$'\n'"$ERR"
fi
check "... the step just written is kept, and latest names it" test "$(cat "$ck/latest")" = step-00000030.h5 -a \
  -f "$ck/step-00000030.h5"
check "... --keep-last 2 kept 20 and 30 only" test "$(cd "$ck" && ls step-*.h5 | tr '\n' ' ')" = \
  "step-00000020.h5 step-00000030.h5 "
check "... the abandoned checkpoints are kept aside" test -f "$ck/step-00000050.h5.abandoned"

run_mpi 2 60 "${BASE[@]}" --keep-last 2 --max-steps 40
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "resumed from '$ck/step-00000030.h5': step 30" <<<"$OUT"; then
  pass "--resume auto continues this run (step 30), not the abandoned one (step 50)"
else
  fail "--resume auto after the branch: rc $RC"$'\n'"$(grep -m2 'resumed\|scratch' <<<"$OUT")"
fi

# 2. Nothing left to do.
run_mpi 2 60 "${BASE[@]}" --keep-last 2 --max-steps 40
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "training is already complete: resumed at step 40 of 40" <<<"$OUT" &&
  ! grep -q "final training loss" <<<"$OUT"; then
  pass "resumed at the last step: 'already complete', exit 0, no loss printed"
else
  fail "resumed at the last step: rc $RC"$'\n'"$OUT"
fi

# 3. The disk fails on the newest checkpoint.
before=$(cksum <"$ck/step-00000040.h5")
MNDDP_TEST_EIO_FILE=/step-00000040.h5 LD_PRELOAD=$MNDDP_EIO_PRELOAD run_mpi 2 60 "${BASE[@]}" --keep-last 2 --max-steps 50
CASES=$((CASES + 1))
line=$(grep -m1 'mnddp: error:' <<<"$ERR")
if [ "$RC" = 1 ] && [ "$(grep -c 'mnddp: error:' <<<"$ERR")" = 1 ] && grep -q "step-00000040.h5' cannot be read" <<<"$line" &&
  grep -q "left as it is" <<<"$line"; then
  pass "EIO on the newest checkpoint: exit 1, one message: $(cut -c1-150 <<<"$line")"
else
  fail "EIO on the newest checkpoint: rc $RC"$'\n'"$ERR"
fi
check "... the checkpoint was neither renamed nor changed" test -f "$ck/step-00000040.h5" -a \
  ! -e "$ck/step-00000040.h5.corrupt" -a "$(cksum <"$ck/step-00000040.h5")" = "$before"
run_mpi 2 60 "${BASE[@]}" --keep-last 2 --max-steps 50
check "... and once the disk reads again, the run resumes from it" grep -q "resumed from '$ck/step-00000040.h5'" \
  <<<"$OUT"
finish
