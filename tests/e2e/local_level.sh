# The node-local checkpoint level on one node (mpirun, 2 ranks): a run that crashes at step 50, with
# file-system checkpoints every 40 steps and node-local ones every 4, is started again with the same
# command. It restores from the node-local level (newer than --checkpoint-dir's step 40), says so in
# one line, and ends bitwise where an uninterrupted run ends: at --zero 0 (the node's whole file) and
# at --zero 2 (assembled from the base and both ranks' share files). A node-local file that fails
# its checksum sends the restart to --checkpoint-dir, saying why. Two node-local checkpoints that do
# not fit in the directory's file system are refused before training, with one line.
source "$(dirname "$0")/lib.sh"
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")
"$MNDDP_DATA_BIN" synth --out "$WORK/d" --train-samples 512 --val-samples 64 --shards 4 --shape 1,6,6 \
  --classes 4 --seed 7 >/dev/null
# 512 samples / (2 ranks x 8) = 32 steps per epoch, 128 in all.
BASE=(--train-data "$WORK/d/train_*.h5" --val-data "$WORK/d/val_*.h5" --num-classes 4 --batch-size 8
  --epochs 4 --dropout 0.1 --metrics-file "" --log-interval 8)

# restored_step: the step the last run restored from the node-local level ("" when it did not).
restored_step() { sed -n 's/.*restore: step \([0-9]*\) from the node-local level.*/\1/p' <<<"$OUT"; }

for zero in 0 2; do
  if [ "$zero" = 0 ]; then OPT=(--hidden 32 --optimizer sgd --lr 0.05); else
    OPT=(--hidden 32 --zero 2 --optimizer adamw --lr 0.003); fi
  run_mpi 2 120 "${BASE[@]}" "${OPT[@]}" --checkpoint-dir "$WORK/straight-$zero"
  [ "$RC" = 0 ] || { fail "--zero $zero: the uninterrupted run failed (rc $RC): $ERR"; continue; }
  LEVELS=("${BASE[@]}" "${OPT[@]}" --checkpoint-dir "$WORK/ck-$zero" --checkpoint-interval 40
    --local-checkpoint-dir "$WORK/local-$zero" --local-checkpoint-interval 4)
  run_mpi 2 120 "${LEVELS[@]}" --inject-fault crash@50:1
  CASES=$((CASES + 1))
  if [ "$RC" != 0 ] && compgen -G "$WORK/local-$zero/step-*.h5" >/dev/null; then
    pass "--zero $zero: crashed at step 50 (rc $RC), leaving $(ls "$WORK/local-$zero" | grep -c '^step-') node-local file(s)"
  else
    fail "--zero $zero: the crash left rc $RC and $(ls "$WORK/local-$zero" 2>&1 | tr '\n' ' ')"
  fi
  run_mpi 2 120 "${LEVELS[@]}"
  step=$(restored_step)
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$step" ] && ((step > 40 && step <= 50)); then
    pass "--zero $zero: restored from the node-local level at step $step, newer than --checkpoint-dir's 40: $(grep -o 'restore: .*' <<<"$OUT")"
  else
    fail "--zero $zero: restart rc $RC, restored step '$step':"$'\n'"$(grep -E 'restore|resumed|error' <<<"$OUT$ERR")"
  fi
  check "--zero $zero: continued bitwise to the uninterrupted run's end" \
    "${COMPARE[@]}" "$WORK/straight-$zero/step-00000128.h5" "$WORK/ck-$zero/step-00000128.h5"
done

# A node-local file that fails its checksum: the restart falls back to --checkpoint-dir and says why.
# (The crash comes at step 100, when the asynchronous commit of step 40 has long ended.)
run_mpi 2 120 "${BASE[@]}" --hidden 32 --optimizer sgd --lr 0.05 --checkpoint-dir "$WORK/ck-bad" \
  --checkpoint-interval 40 --local-checkpoint-dir "$WORK/local-bad" --local-checkpoint-interval 4 --inject-fault crash@100:1
local_file=$(ls "$WORK/local-bad"/step-*.h5 | tail -1)
"$MNDDP_PYTHON" - "$local_file" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    w = f["model/body.0.weight"]
    w[0, 0] = w[0, 0] + 1.0  # the bytes change, the stored checksum does not
PY
run_mpi 2 120 "${BASE[@]}" --hidden 32 --optimizer sgd --lr 0.05 --checkpoint-dir "$WORK/ck-bad" \
  --checkpoint-interval 40 --local-checkpoint-dir "$WORK/local-bad" --local-checkpoint-interval 4
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "restore: from --checkpoint-dir '.*ck-bad' (the node-local checkpoint does not verify: .*is corrupt" <<<"$OUT" &&
  grep -q "resumed from '.*ck-bad/step-000000[48]0.h5'" <<<"$OUT"; then
  pass "a corrupt node-local file: resumed from --checkpoint-dir, saying why: $(grep -o 'restore: .*' <<<"$OUT" | cut -c1-160)"
else
  fail "a corrupt node-local file: rc $RC:"$'\n'"$(grep -E 'restore|resumed|error' <<<"$OUT$ERR")"
fi

# Two node-local checkpoints that do not fit: a 256 KiB tmpfs for a 4 MB model.
if unshare -m true 2>/dev/null; then
  mkdir -p "$WORK/tiny"
  export WORK
  unshare -m bash -c 'mount -t tmpfs -o size=256k tmpfs "$1" && shift && timeout 60 "$@" >"$WORK/tiny.out" \
      2>"$WORK/tiny.err"; echo $? >"$WORK/tiny.rc"' \
    _ "$WORK/tiny" "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train --threads 1 "${BASE[@]}" --hidden 512 \
    --layers 3 --checkpoint-dir "$WORK/ck-tiny" --local-checkpoint-dir "$WORK/tiny/local" --local-checkpoint-interval 4
  CASES=$((CASES + 1))
  line=$(grep 'mnddp: error:' "$WORK/tiny.err")
  if [ "$(cat "$WORK/tiny.rc")" = 2 ] && [ "$(grep -c 'mnddp: error:' "$WORK/tiny.err")" = 1 ] &&
    grep -q "two node-local checkpoints need .* GiB on .* and its file system has .* free" <<<"$line" &&
    ! grep -q "step [0-9]*/" "$WORK/tiny.out"; then
    pass "two node-local checkpoints that do not fit: refused before training: $(cut -c1-200 <<<"$line")"
  else
    fail "no room for the node-local level: rc $(cat "$WORK/tiny.rc"): $(tail -3 "$WORK/tiny.err")"
  fi
else
  echo "skip: the no-room case needs mount namespaces (unshare -m), not available here"
fi
finish
