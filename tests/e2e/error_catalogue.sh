# The bad-input catalogue of docs/ERRORS.md, case by case: option values, the config file and the
# environment, data files and shards, checkpoints, and the single-process tools (mnddp export,
# mnddp-data). Each case ends in time (10 s) with exit code 2 and one message, and leaves the outputs
# that already exist (checkpoints, metrics file, datasets) exactly as they were.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}"

# --- "nothing overwritten" -------------------------------------------------------------------------
# fingerprint PATH... : every entry under the paths with its type, size, mtime and checksum.
fingerprint() {
  find "$@" -printf '%p %y %s %T@\n' 2>&1 | sort
  find "$@" -type f -exec md5sum {} + 2>&1 | sort -k2
}
# protect PATH... : the outputs the following cases must leave alone (until the next protect).
protect() {
  PROTECTED=("$@")
  fingerprint "$@" >"$WORK/protected.before"
}
# untouched : true when the protected paths are as they were at protect (else says what changed).
untouched() {
  fingerprint "${PROTECTED[@]}" >"$WORK/protected.after"
  CHANGED=$(diff "$WORK/protected.before" "$WORK/protected.after")
  [ -z "$CHANGED" ]
}

# mpirun's own report of a non-zero exit: the only stderr lines allowed beside mnddp's one message.
MPIRUN_NOISE='^-+$|^$|Primary job +terminated|a non-zero exit code|detected that one or more processes exited|the job to be terminated|^ +Process name:|^ +Exit code:'

# has_needles NAME LINE NEEDLE... : true when LINE holds every NEEDLE (else records the failure).
has_needles() {
  local name=$1 line=$2
  shift 2
  for needle in "$@"; do
    if ! grep -qF -- "$needle" <<<"$line"; then fail "$name: message lacks '$needle': $line"; return 1; fi
  done
}

# refused NAME NEEDLE... : the last mnddp train run was refused as bad input: exit code 2 in time,
# exactly one "mnddp: error:" line holding every NEEDLE and nothing else on stderr (no second
# message, no library dump), and the protected outputs as they were.
refused() {
  local name=$1
  shift
  ended_with_usage_code "$name" || return
  if ! untouched; then fail "$name: existing output changed:"$'\n'"$CHANGED"; return; fi
  local line
  line=$(grep -vE "$MPIRUN_NOISE" <<<"$ERR")
  if [ "$(grep -c . <<<"$line")" != 1 ] || [ "${line#mnddp: error: }" = "$line" ]; then
    fail "$name: stderr is not one 'mnddp: error:' line:"$'\n'"$ERR"
    return
  fi
  has_needles "$name" "$line" "$@" && pass "$name (${ELAPSED}s): $line"
}

# refused_by_rank NAME NEEDLE... : like refused, for an error one rank meets mid-run (the abort
# path, "[rank r@host] mnddp: fatal: ..."; mpirun reports the abort in its own words).
refused_by_rank() {
  local name=$1
  shift
  ended_with_usage_code "$name" || return
  if ! untouched; then fail "$name: existing output changed:"$'\n'"$CHANGED"; return; fi
  local line
  line=$(grep -m1 'mnddp: fatal:' <<<"$ERR")
  has_needles "$name" "$line" "$@" && pass "$name (${ELAPSED}s): $line"
}

# run_tool SECONDS COMMAND... : a single-process tool; sets RC, ERR and ELAPSED like run_mpi.
run_tool() {
  local seconds=$(($1 * ${MNDDP_TEST_TIME_SCALE:-1}))
  shift
  local start=$SECONDS
  timeout --kill-after=5 "$seconds" "$@" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  ELAPSED=$((SECONDS - start))
  ERR=$(cat "$WORK/err")
}

# tool_refused NAME PREFIX NEEDLE... : exit code 2 in time, stderr exactly one line "PREFIX ..."
# holding every NEEDLE, and the protected outputs left alone.
tool_refused() {
  local name=$1 prefix=$2
  shift 2
  ended_with_usage_code "$name" || return
  if ! untouched; then fail "$name: existing output changed:"$'\n'"$CHANGED"; return; fi
  if [ "$(wc -l <"$WORK/err")" != 1 ] || [ "${ERR#"$prefix"}" = "$ERR" ]; then
    fail "$name: stderr is not one '$prefix' line:"$'\n'"$ERR"
    return
  fi
  has_needles "$name" "$ERR" "$@" && pass "$name (${ELAPSED}s): $ERR"
}

# --- fixtures --------------------------------------------------------------------------------------
"$MNDDP_DATA_BIN" synth --out "$WORK/d" --train-samples 256 --val-samples 64 --shards 2 --shape 1,8,8 \
  --classes 4 >/dev/null
"$MNDDP_DATA_BIN" synth --out "$WORK/flat" --train-samples 64 --val-samples 16 --shards 1 --shape 10 \
  --classes 4 >/dev/null
"$MNDDP_DATA_BIN" stats "$WORK/flat/train_*.h5" --out "$WORK/stats10.json" >/dev/null
DATA=(--train-data "$WORK/d/train_*.h5" --val-data "$WORK/d/val_*.h5" --num-classes 4 --batch-size 8
  --max-steps 5 --hidden 16)
# A finished run's outputs, which every refused run below must leave alone.
run_mpi 2 30 "${DATA[@]}" --checkpoint-dir "$WORK/ck" --metrics-file "$WORK/metrics.jsonl"
CKPT="$WORK/ck/step-00000005.h5"
if [ "$RC" != 0 ] || [ ! -f "$CKPT" ]; then
  fail "fixture run (rc $RC): $ERR"
  finish
  exit 1
fi
KEEP=(--checkpoint-dir "$WORK/ck" --metrics-file "$WORK/metrics.jsonl")
GOOD=("${DATA[@]}" "${KEEP[@]}")

mkdir -p "$WORK/bad" "$WORK/shaped/train_000.h5"
"$MNDDP_PYTHON" - "$WORK" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
with h5py.File(f"{work}/d/train_000.h5", "r") as src:
    x, y = src["x"][...], src["y"][...]
def shard(name, **datasets):
    with h5py.File(f"{work}/bad/{name}.h5", "w") as f:
        for key, value in datasets.items():
            f[key] = value
shard("string_labels", x=x, y=np.array([b"cat"] * len(y)))
shard("negative_label", x=x, y=np.where(np.arange(len(y)) == 5, -1, y))
shard("empty", x=x[:0], y=y[:0])
shard("short_labels", x=x, y=y[:-3])
shard("string_inputs", x=np.array([[b"a", b"b"]] * len(y)), y=y)
shard("val_6x6", x=x[:, :, :6, :6], y=y)
shard("val_label_9", x=x, y=np.where(np.arange(len(y)) == 3, 9, y))
raw = open(f"{work}/d/train_000.h5", "rb").read()
open(f"{work}/bad/truncated.h5", "wb").write(raw[: len(raw) // 2])
open(f"{work}/bad/text.h5", "w").write("not an HDF5 file\n")
open(f"{work}/bad/notck.h5", "w").write("not a checkpoint\n")
# A checkpoint whose first weight array no longer matches its checksum.
ckpt = f"{work}/ck/step-00000005.h5"
with h5py.File(ckpt, "r") as f:
    offset = f["model/body.0.weight"].id.get_offset()
corrupt = bytearray(open(ckpt, "rb").read())
corrupt[offset + 16 : offset + 80] = b"\xff" * 64
open(f"{work}/bad/corrupt_ckpt.h5", "wb").write(corrupt)
PY
printf 'not json\n' >"$WORK/bad/stats.json"
printf '%s\n%s\n' "$WORK/d/train_000.h5" "$WORK/gone.h5" >"$WORK/partial.txt"
printf 'not a directory\n' >"$WORK/afile"
BAD="$WORK/bad"

protect "$WORK/ck" "$WORK/metrics.jsonl"

# --- option values ---------------------------------------------------------------------------------
run_mpi 2 10 "${GOOD[@]}" --batch-size abc
refused "non-numeric integer" "the argument ('abc') for option '--batch-size' is invalid"

run_mpi 2 10 "${GOOD[@]}" --momentum 1.5
refused "float outside its range" "--momentum: must be in [0, 1) (got '1.5')"

run_mpi 2 10 "${GOOD[@]}" --optimizer sgdx
refused "unknown choice" "--optimizer: must be one of sgd, adamw, lars, lamb (got 'sgdx')"

run_mpi 2 10 "${GOOD[@]}" --optimizer lars --lars-eta -1
refused "LARS trust coefficient not positive" "--lars-eta: must be > 0 (got '-1')"

run_mpi 2 10 "${GOOD[@]}" --optimizer lamb --nesterov
refused "Nesterov momentum with another optimizer than SGD" \
  "--nesterov: only --optimizer sgd has Nesterov momentum (got --optimizer lamb)"

run_mpi 2 10 "${GOOD[@]}" --no-decay-norm-bias maybe
refused "a tri-state switch that is none of its values" "--no-decay-norm-bias: must be auto, true or false (got 'maybe')"

run_mpi 2 10 "${GOOD[@]}" --shuffle maybe
refused "bad boolean" "the argument ('maybe') for option '--shuffle' is invalid"

run_mpi 2 10 "${GOOD[@]}" --bogus-option 1
refused "unknown option" "unrecognised option '--bogus-option'"

run_mpi 2 10 "${GOOD[@]}" --preempt-signals USR2,KILL
refused "signal that cannot be caught" "--preempt-signals: 'KILL' is not a signal that can be caught"

run_mpi 2 10 "${DATA[@]}" --metrics-file "$WORK/metrics.jsonl" --steps-per-run 2
refused "steps-per-run without a checkpoint dir" "--steps-per-run 2: needs --checkpoint-dir"

run_mpi 2 10 "${GOOD[@]}" --lr 0.01 --min-lr 0.05
refused "min-lr above lr" "--min-lr: must not exceed --lr (got min-lr 0.05, lr 0.01)"

# An option given twice (run_mpi merges repeats, so this one calls mnddp directly).
merge_options --threads 1 "${GOOD[@]}"
RC=0
timeout --kill-after=5 $((10 * ${MNDDP_TEST_TIME_SCALE:-1})) "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}" --hidden 32 \
  >"$WORK/out" 2>"$WORK/err" || RC=$?
OUT=$(cat "$WORK/out")
ERR=$(cat "$WORK/err")
ELAPSED=0
refused "option given twice on the command line" "--hidden: given more than once on the command line ('16', then '32')"

run_mpi 2 10 "${GOOD[@]}" --device cpu --amp fp16
refused "fp16 autocast on the CPU" "--amp fp16: float16 autocast needs a CUDA device"

# --- the config file and the environment -----------------------------------------------------------
printf 'lr = 0.1\nlr = 0.2\n' >"$WORK/twice.ini"
run_mpi 2 10 "${GOOD[@]}" --config "$WORK/twice.ini"
refused "key given twice in the config file" "twice.ini" "option 'lr' cannot be specified more than once"

printf 'lr 0.1\n' >"$WORK/syntax.ini"
run_mpi 2 10 "${GOOD[@]}" --config "$WORK/syntax.ini"
refused "config line without '='" "syntax.ini" "invalid line 'lr 0.1'"

printf 'epochs = abc\n' >"$WORK/type.ini"
run_mpi 2 10 "${GOOD[@]}" --config "$WORK/type.ini"
refused "non-numeric value in the config file" "type.ini" "the argument ('abc') for option 'epochs' is invalid"

printf 'epochs = 0\n' >"$WORK/range.ini"
run_mpi 2 10 "${GOOD[@]}" --config "$WORK/range.ini"
refused "out-of-range value in the config file" "--epochs: must be >= 1 (got '0')"

MNDDP_SHUFFLE=maybe run_mpi 2 10 "${GOOD[@]}"
refused "bad boolean in the environment" "environment variable MNDDP_SHUFFLE='maybe'"

MNDDP_MOMENTUM=2 run_mpi 2 10 "${GOOD[@]}"
refused "out-of-range value in the environment" "--momentum: must be in [0, 1) (got '2')"

SLURM_NTASKS=3 SLURM_STEP_ID=0 SLURM_PROCID=0 run_mpi 2 10 "${GOOD[@]}"
refused "SLURM_NTASKS disagrees with the world (outputs kept)" "SLURM_NTASKS=3 but MPI sees a world of 2"

# --- data files and shards -------------------------------------------------------------------------
run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/text.h5"
refused "file that is not HDF5" "cannot open HDF5 file" "text.h5': not an HDF5 file"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/truncated.h5"
refused "truncated HDF5 file" "cannot open HDF5 file" "truncated.h5': truncated file"

run_mpi 2 10 "${GOOD[@]}" --train-data "$WORK/shaped/train_000.h5"
refused "a directory where a shard should be" "--train-data: no *.h5 or *.hdf5 files in directory" "train_000.h5"

run_mpi 2 10 "${GOOD[@]}" --train-data "$WORK/partial.txt"
refused "list file naming a missing shard" "--train-data: file not found" "gone.h5"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/string_labels.h5"
refused "string labels" "string_labels.h5': dataset 'y' must be a 1-D integer array of class labels, found string"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/negative_label.h5"
refused "negative label" "negative_label.h5': dataset 'y' has label -1, outside [0, 4)"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/empty.h5"
refused "empty shard" "empty.h5': dataset 'x' has 0 samples (empty shard)"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/short_labels.h5"
refused "fewer labels than samples" "short_labels.h5': dataset 'y' has 125 labels but 'x' has 128 samples"

run_mpi 2 10 "${GOOD[@]}" --train-data "$BAD/string_inputs.h5"
refused "string inputs" "string_inputs.h5': dataset 'x' has unsupported element type string"

run_mpi 2 10 "${GOOD[@]}" --val-data "$BAD/val_6x6.h5"
refused "validation samples shaped unlike the training ones" \
  "--val-data: samples shaped [1, 6, 6] but the training samples are [1, 8, 8]"

run_mpi 2 10 "${GOOD[@]}" --val-data "$BAD/val_label_9.h5"
refused "validation label outside num-classes" "val_label_9.h5': dataset 'y' has label 9, outside [0, 4)"

run_mpi 2 10 "${GOOD[@]}" --feature-stats "$WORK/absent.json"
refused "missing feature stats file" "feature stats file" "absent.json': cannot be read"

run_mpi 2 10 "${GOOD[@]}" --feature-stats "$BAD/stats.json"
refused "feature stats file that is not JSON" "stats.json': not a stats file written by 'mnddp-data stats'"

run_mpi 2 10 "${GOOD[@]}" --feature-stats "$WORK/stats10.json"
refused "feature stats of other data" "stats10.json': 10 features, but the data's samples have 64"

run_mpi 2 10 "${GOOD[@]}" --feature-stats "$WORK/d"
refused "feature stats path that is a directory" "feature stats file" "d': is a directory, not a stats file"

run_mpi 2 10 "${DATA[@]}" --metrics-file "" --preempt-signals USR2,FOO
refused "bad signal without --checkpoint-dir" "--preempt-signals: 'FOO' is not a signal that can be caught"

run_mpi 2 10 "${DATA[@]}" --checkpoint-dir "$WORK/ck" --metrics-file "$WORK/ck"
refused_by_rank "metrics file that is a directory" "[rank 0@" "--metrics-file: cannot open" "Is a directory"

# --- checkpoints -----------------------------------------------------------------------------------
run_mpi 2 10 "${GOOD[@]}" --resume "$WORK/ck/step-00000099.h5"
refused "--resume path that does not exist" "--resume: cannot open HDF5 file" "step-00000099.h5': no such file"

run_mpi 2 10 "${GOOD[@]}" --resume "$BAD/notck.h5"
refused "--resume file that is not HDF5" "--resume: cannot open HDF5 file" "notck.h5': not an HDF5 file"

run_mpi 2 10 "${GOOD[@]}" --resume "$WORK/d/train_000.h5"
refused "--resume file that is not a checkpoint" "train_000.h5' is not an mnddp checkpoint"

run_mpi 2 10 "${GOOD[@]}" --resume "$BAD/corrupt_ckpt.h5"
refused "--resume checkpoint with a bad checksum" "--resume: checkpoint" "array 'model/body.0.weight' is corrupt (XXH3-64"

run_mpi 2 10 "${GOOD[@]}" --resume "$WORK/ck"
refused "--resume path that is a directory" "--resume: cannot open HDF5 file" "ck': it is a directory, not a file"

run_mpi 2 10 "${GOOD[@]}" --resume "$CKPT" --hidden 32
refused "checkpoint of another width" "'model/body.0.weight' has shape [16, 64] but the model has [32, 64]"

run_mpi 2 10 "${GOOD[@]}" --resume "$CKPT" --model convnet
refused "checkpoint of another model" "has no 'model/features.0.weight': it was written for a different model"

run_mpi 2 10 "${GOOD[@]}" --layers 3
refused "--resume auto finds a checkpoint of another depth" "has no 'model/body.4.weight'"

run_mpi 2 10 "${DATA[@]}" --metrics-file "$WORK/metrics.jsonl" --checkpoint-dir "$WORK/afile"
refused "checkpoint dir that is a file" "--checkpoint-dir: cannot create" "afile': Not a directory"

run_mpi 2 10 "${DATA[@]}" --metrics-file "" --local-checkpoint-dir "$WORK/local" --local-checkpoint-interval 5
refused "a node-local level without --checkpoint-dir" "--local-checkpoint-dir '" "local': needs --checkpoint-dir"

run_mpi 2 10 "${GOOD[@]}" --local-checkpoint-dir "$WORK/local"
refused "a node-local level without its interval" "local': needs --local-checkpoint-interval"

mkdir -p "$WORK/theirs"
echo "/runs/theirs/checkpoints" >"$WORK/theirs/run"
cp "$CKPT" "$WORK/theirs/step-00000005.h5"
protect "$WORK/ck" "$WORK/metrics.jsonl" "$WORK/theirs"
run_mpi 2 10 "${GOOD[@]}" --local-checkpoint-dir "$WORK/theirs" --local-checkpoint-interval 5
refused "a node-local directory of another run" "--local-checkpoint-dir '" \
  "theirs' holds the node-local checkpoints of another run (--checkpoint-dir '/runs/theirs/checkpoints')"
protect "$WORK/ck" "$WORK/metrics.jsonl"

# --- mnddp export ----------------------------------------------------------------------------------
run_tool 10 "$MNDDP_BIN" export --checkpoint "$CKPT"
tool_refused "export without --out" "mnddp: error:" "the option '--out' is required but missing"

run_tool 10 "$MNDDP_BIN" export --checkpoint "$WORK/ck/step-00000099.h5" --out "$WORK/model.pt"
tool_refused "export of a missing checkpoint" "mnddp: error:" "step-00000099.h5': no such file"

run_tool 10 "$MNDDP_BIN" export --checkpoint "$WORK/d/train_000.h5" --out "$WORK/model.pt"
tool_refused "export of a data shard" "mnddp: error:" "train_000.h5': no model arrays in it"

run_tool 10 "$MNDDP_BIN" export --checkpoint "$BAD/corrupt_ckpt.h5" --out "$WORK/model.pt"
tool_refused "export of a corrupt checkpoint" "mnddp: error:" "is corrupt (XXH3-64"
CASES=$((CASES + 1))
if [ -e "$WORK/model.pt" ]; then fail "a refused export left $WORK/model.pt"; else pass "refused exports wrote no model.pt"; fi

run_tool 10 "$MNDDP_BIN" export --checkpoint "$CKPT" --out "$WORK/ck"
tool_refused "export --out that is a directory" "mnddp: error:" "export: --out" "exists; pass --overwrite"

# --- mnddp-data ------------------------------------------------------------------------------------
protect "$WORK/d" "$WORK/ck" "$WORK/metrics.jsonl"
run_tool 10 "$MNDDP_DATA_BIN" frobnicate
tool_refused "mnddp-data unknown command" "mnddp-data: error:" "unknown command 'frobnicate'"

run_tool 10 "$MNDDP_DATA_BIN" synth --out "$WORK/d" --train-samples 64 --val-samples 16 --shards 1 --shape 4
tool_refused "synth over an existing dataset" "mnddp-data: error:" "train_000.h5' already exists; pass --overwrite"

mkdir -p "$WORK/blocked/train_000.h5" && touch "$WORK/blocked/train_000.h5/keep"
run_tool 10 "$MNDDP_DATA_BIN" synth --out "$WORK/blocked" --train-samples 64 --val-samples 0 --shards 1 --shape 4 \
  --overwrite
tool_refused "synth --overwrite with a directory in the way" "mnddp-data: error:" "cannot remove" "train_000.h5"

run_tool 10 "$MNDDP_DATA_BIN" synth --out "$WORK/s" --shape 1,x,3
tool_refused "synth --shape not a list of positive integers" "mnddp-data: error:" "--shape: '1,x,3' is not"

run_tool 10 "$MNDDP_DATA_BIN" synth --out "$WORK/s" --train-samples 2 --shards 4
tool_refused "synth more shards than samples" "mnddp-data: error:" "--shards 4 exceeds --train-samples 2"

"$MNDDP_PYTHON" - "$WORK" <<'PY'
import sys, numpy as np
work = sys.argv[1]
np.save(f"{work}/x.npy", np.zeros((10, 4), np.float32))
np.save(f"{work}/y.npy", np.arange(10) % 3)
np.save(f"{work}/y9.npy", np.arange(9) % 3)
open(f"{work}/bad.npy", "wb").write(b"not numpy")
open(f"{work}/cells.csv", "w").write("1,2,0\n3,abc,1\n")
PY
run_tool 10 "$MNDDP_DATA_BIN" convert --x "$WORK/x.npy" --y "$WORK/y9.npy" --out "$WORK/c"
tool_refused "convert labels unlike the inputs" "mnddp-data: error:" "y9.npy': has 9 labels but the inputs have 10"

run_tool 10 "$MNDDP_DATA_BIN" convert --x "$WORK/bad.npy" --y "$WORK/y.npy" --out "$WORK/c"
tool_refused "convert a file that is not .npy" "mnddp-data: error:" "bad.npy': not a .npy file"

run_tool 10 "$MNDDP_DATA_BIN" convert --csv "$WORK/cells.csv" --out "$WORK/c"
tool_refused "convert a CSV cell that is not a number" "mnddp-data: error:" "line 2 column 1: 'abc' is not a number"

run_tool 10 "$MNDDP_DATA_BIN" convert --x "$WORK/x.npy" --y "$WORK/y.npy" --out "$WORK/d"
tool_refused "convert over an existing shard" "mnddp-data: error:" "train_000.h5' already exists; pass --overwrite"

run_tool 10 "$MNDDP_DATA_BIN" reshard "$WORK/d/train_*.h5" --out "$WORK/d" --shards 2 --prefix train --overwrite
tool_refused "reshard onto its own input (even with --overwrite)" "mnddp-data: error:" "is also an input"

run_tool 10 "$MNDDP_DATA_BIN" reshard "$WORK/d/train_*.h5" --out "$WORK/r" --shards 1000
tool_refused "reshard more shards than samples" "mnddp-data: error:" "--shards 1000 exceeds the 256 samples"

run_tool 10 "$MNDDP_DATA_BIN" inspect "$WORK/d/train_*.h5" --num-classes 3
tool_refused "inspect labels outside --num-classes" "mnddp-data: error:" "has label 3, outside [0, 3)"

run_tool 10 "$MNDDP_DATA_BIN" inspect "$WORK/d/train_000.h5" "$WORK/flat/train_000.h5"
tool_refused "inspect shards whose shapes differ" "mnddp-data: error:" "shards disagree on 'x'"

cp "$WORK/stats10.json" "$WORK/stats.json"
protect "$WORK/d" "$WORK/stats.json"
run_tool 10 "$MNDDP_DATA_BIN" stats "$WORK/d/train_*.h5" --out "$WORK/stats.json"
tool_refused "stats over an existing file" "mnddp-data: error:" "stats.json' already exists; pass --overwrite"

run_tool 10 "$MNDDP_DATA_BIN" stats "$BAD/truncated.h5" --out "$WORK/stats.json" --overwrite
tool_refused "stats of a truncated file (--overwrite keeps the old file)" "mnddp-data: error:" "truncated file"

finish
