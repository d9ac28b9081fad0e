# Checkpoints, end to end on 2 ranks: a run stopped and resumed (--steps-per-run, a preemption
# signal) ends with bitwise-identical parameters, optimizer state and RNG, and an identical loss log,
# mid-epoch and across epoch boundaries, with SGD, with AdamW + a schedule, and with LARS and LAMB
# (two param groups each); a corrupt newest
# checkpoint falls back to the previous one; stale *.tmp files are removed; another world size resumes.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 1000 --val-samples 100 --shards 3 --shape 1,6,6 \
  --classes 4 >/dev/null
BASE=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --num-classes 4 --batch-size 8
  --epochs 3 --log-interval 5 --dropout 0.1 --hidden 32)

# straight NAME ARGS...: one uninterrupted run into $WORK/NAME-straight
straight() {
  local name=$1
  shift
  run_mpi 2 120 "${BASE[@]}" "$@" --checkpoint-dir "$WORK/$name-straight" --metrics-file "$WORK/$name-straight.jsonl"
  [ "$RC" = 0 ] || fail "$name: straight run failed (rc $RC): $ERR"
}

# chunked NAME CHUNK ARGS...: the same run in invocations of CHUNK steps into $WORK/NAME-chunked
chunked() {
  local name=$1 chunk=$2
  shift 2
  for _ in 1 2 3 4 5 6 7 8; do
    run_mpi 2 120 "${BASE[@]}" "$@" --checkpoint-dir "$WORK/$name-chunked" --metrics-file "$WORK/$name-chunked.jsonl" \
      --steps-per-run "$chunk"
    [ "$RC" = 0 ] || { fail "$name: chunked run failed (rc $RC): $ERR"; return; }
    grep -q "steps-per-run $chunk reached" <<<"$OUT" || return 0
  done
}

final() { echo "$WORK/$1/$(cat "$WORK/$1/latest")"; }

# 1000 samples / (2 x 8) = 62 steps per epoch, 186 in all: chunks of 25 stop mid-epoch and cross
# epoch boundaries; 62 stops exactly at them.
straight sgd --optimizer sgd --lr 0.05
chunked sgd 25 --optimizer sgd --lr 0.05
check "SGD resumed mid-epoch and across epochs is bitwise identical, same loss log" \
  "${COMPARE[@]}" "$(final sgd-straight)" "$(final sgd-chunked)" --metrics "$WORK/sgd-straight.jsonl" "$WORK/sgd-chunked.jsonl"

# A ConvNet trains channels-last on CPU (--memory-format auto): its checkpoints hold the weights and
# momentum buffers in logical order, and they come back into the NHWC layout.
CONVNET=(--model convnet --layers 2 --hidden 8 --optimizer sgd --lr 0.05)
straight convnet "${CONVNET[@]}"
chunked convnet 25 "${CONVNET[@]}"
check "the chunks trained channels-last" grep -q "weights and their activations channels-last" <<<"$OUT"
check "a channels-last ConvNet resumed mid-epoch is bitwise identical, same loss log" \
  "${COMPARE[@]}" "$(final convnet-straight)" "$(final convnet-chunked)" --metrics "$WORK/convnet-straight.jsonl" "$WORK/convnet-chunked.jsonl"

# --max-steps ends mid-epoch (step 40 of 62): a later run with a larger --max-steps goes on from that
# step's place in the epoch, as the uninterrupted run does (a constant learning rate: the schedule
# spans --max-steps; no validation: the shorter run's own last step validates).
LONGER=(--optimizer sgd --lr 0.05 --val-data "")
straight longer "${LONGER[@]}" --max-steps 70
run_mpi 2 120 "${BASE[@]}" "${LONGER[@]}" --max-steps 40 --checkpoint-dir "$WORK/longer-extended" \
  --metrics-file "$WORK/longer-extended.jsonl"
run_mpi 2 120 "${BASE[@]}" "${LONGER[@]}" --max-steps 70 --checkpoint-dir "$WORK/longer-extended" \
  --metrics-file "$WORK/longer-extended.jsonl"
check "a run ended by --max-steps mid-epoch goes on under a larger --max-steps, bitwise identical" \
  "${COMPARE[@]}" "$(final longer-straight)" "$(final longer-extended)" --metrics "$WORK/longer-straight.jsonl" "$WORK/longer-extended.jsonl"

ADAMW=(--optimizer adamw --lr 0.003 --lr-schedule cosine --warmup-steps 10 --weight-decay 0.01)
straight adamw "${ADAMW[@]}"
chunked adamw 62 "${ADAMW[@]}"
check "AdamW + cosine schedule resumed at epoch boundaries is bitwise identical" \
  "${COMPARE[@]}" "$(final adamw-straight)" "$(final adamw-chunked)" --metrics "$WORK/adamw-straight.jsonl" "$WORK/adamw-chunked.jsonl"

# LARS and LAMB with their default param groups (biases without decay or trust ratio), resumed
# mid-epoch under a changing learning rate: momentum buffers, moments and step counts come back by
# parameter name, whichever group holds the parameter.
LARS=(--optimizer lars --lr 2 --lars-eta 0.01 --weight-decay 0.0005 --lr-schedule cosine --warmup-steps 10)
straight lars "${LARS[@]}"
chunked lars 25 "${LARS[@]}"
check "LARS (two param groups) + cosine schedule resumed mid-epoch is bitwise identical, same loss log" \
  "${COMPARE[@]}" "$(final lars-straight)" "$(final lars-chunked)" --metrics "$WORK/lars-straight.jsonl" "$WORK/lars-chunked.jsonl"
LAMB=(--optimizer lamb --lr 0.005 --weight-decay 0.01 --lr-schedule linear --warmup-steps 10)
straight lamb "${LAMB[@]}"
chunked lamb 25 "${LAMB[@]}"
check "LAMB (two param groups) + linear schedule resumed mid-epoch is bitwise identical, same loss log" \
  "${COMPARE[@]}" "$(final lamb-straight)" "$(final lamb-chunked)" --metrics "$WORK/lamb-straight.jsonl" "$WORK/lamb-chunked.jsonl"

# Preemption: SIGUSR2 to mpirun (forwarded to every rank) -> checkpoint at one step on all ranks,
# exit code 3; the resumed run finishes identical to the uninterrupted one.
PRE=("${BASE[@]}" --optimizer sgd --lr 0.05 --epochs 40 --checkpoint-dir "$WORK/pre" --metrics-file "$WORK/pre.jsonl")
merge_options --threads 1 "${PRE[@]}"
"$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}" >"$WORK/pre.out" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "step 10/" "$WORK/pre.out" && break; sleep 0.1; done
kill -USR2 "$launcher"
wait "$launcher"
rc=$?
CASES=$((CASES + 1))
if [ "$rc" = 3 ] && grep -q "preemption signal" "$WORK/pre.out" && [ -f "$WORK/pre/latest" ]; then
  pass "preemption signal: checkpoint and exit code 3 ($(cat "$WORK/pre/latest"))"
else
  fail "preemption: rc $rc: $(tail -5 "$WORK/pre.out")"
fi
run_mpi 2 300 "${PRE[@]}"
run_mpi 2 300 "${BASE[@]}" --optimizer sgd --lr 0.05 --epochs 40 --checkpoint-dir "$WORK/pre-straight" \
  --metrics-file "$WORK/pre-straight.jsonl"
check "a preempted and resumed run ends identical to an uninterrupted one" \
  "${COMPARE[@]}" "$(final pre)" "$(final pre-straight)"

# A corrupt newest checkpoint: resume warns and falls back to the previous one.
run_mpi 2 120 "${BASE[@]}" --optimizer sgd --checkpoint-dir "$WORK/corrupt" --checkpoint-interval 20 --keep-last 3 \
  --epochs 1 --metrics-file ""
newest=$(final corrupt)
"$MNDDP_PYTHON" - "$newest" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    offset = f["model/body.0.weight"].id.get_offset()
with open(sys.argv[1], "r+b") as raw:
    raw.seek(offset + 16)
    raw.write(b"\xff" * 64)
PY
touch "$WORK/corrupt/step-00000099.h5.tmp"
run_mpi 2 120 "${BASE[@]}" --optimizer sgd --checkpoint-dir "$WORK/corrupt" --epochs 2 --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "is not usable" <<<"$OUT" && grep -q "resumed from '.*step-00000060.h5'" <<<"$OUT" &&
  [ ! -e "$WORK/corrupt/step-00000099.h5.tmp" ]; then
  pass "corrupt newest checkpoint falls back to the previous one; stale .tmp removed"
else
  fail "corrupt fallback (rc $RC): $OUT $ERR"
fi

# Another world size: written by 2 ranks x 8, resumed by 1 rank x 16 (the same global batch), without
# dropout (whose random streams are per rank).
RESIZE=("${BASE[@]}" --optimizer sgd --dropout 0 --metrics-file "")
run_mpi 2 120 "${RESIZE[@]}" --checkpoint-dir "$WORK/resize-straight"
run_mpi 2 120 "${RESIZE[@]}" --checkpoint-dir "$WORK/resize" --steps-per-run 30
run_mpi 1 120 "${RESIZE[@]}" --batch-size 16 --checkpoint-dir "$WORK/resize"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "written by 2 ranks" <<<"$OUT"; then
  pass "a checkpoint from 2 ranks resumes on 1"
else
  fail "resize (rc $RC): $OUT $ERR"
fi
check "... and ends close to the uninterrupted 2-rank run (same samples, other summation order)" \
  "${COMPARE[@]}" "$(final resize)" "$(final resize-straight)" --tolerance 1e-4 --skip-rng

# Format 1 (CRC-32 checksums; tests/fixtures, written by mnddp before format 2 with these options):
# still resumed from, and the new checkpoint is format 2 with XXH3-64 checksums h5py can verify.
"$MNDDP_DATA_BIN" synth --out "$WORK/v1data" --train-samples 64 --val-samples 16 --shards 1 --shape 1,4,4 \
  --classes 3 >/dev/null
cp "$MNDDP_SOURCE_DIR/tests/fixtures/checkpoint-v1-crc32.h5" "$WORK/v1.h5"
run_mpi 2 120 --train-data "$WORK/v1data/train_*.h5" --val-data "" --num-classes 3 --model mlp --hidden 4 \
  --layers 1 --optimizer adamw --batch-size 4 --max-steps 5 --resume "$WORK/v1.h5" --checkpoint-dir "$WORK/v2" \
  --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -q "resumed from '.*v1.h5': step 3" <<<"$OUT"; then
  pass "a format-1 checkpoint (CRC-32) resumes"
else
  fail "format 1 resume (rc $RC): $OUT $ERR"
fi
CASES=$((CASES + 1))
verdict=$("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/data_tools/load_checkpoint.py" "$WORK/v2/step-00000005.h5" --verify 2>&1)
if [[ $verdict == *": format 2, "*" arrays verified (xxh3_64)" ]]; then
  pass "... and writes format 2, every XXH3-64 checksum verified by h5py + xxhash: $verdict"
else
  fail "format 2 verification: $verdict"
fi
check "... whose config keeps --loader-threads 0 (auto), not the count this machine resolved it to" \
  "$MNDDP_PYTHON" -c 'import sys, h5py; c = h5py.File(sys.argv[1], "r").attrs["config"]; c = c.decode() if isinstance(c, bytes) else c; sys.exit(0 if "\nloader-threads = 0\n" in c else 1)' \
  "$WORK/v2/step-00000005.h5"
finish
