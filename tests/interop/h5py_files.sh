# Interop: files that h5py and numpy (from the venv) write are read exactly by mnddp (through
# check_h5py_files and `mnddp-data inspect`); convert -> reshard keeps every sample (order-free
# checksums); every bad input ends with exit 2 and one error line naming the file.
# Expects MNDDP_PYTHON, MNDDP_DATA_BIN and MNDDP_INTEROP_CHECK from CTest (tests/CMakeLists.txt).
set -uo pipefail

: "${MNDDP_PYTHON:?}" "${MNDDP_DATA_BIN:?}" "${MNDDP_INTEROP_CHECK:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-interop.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILURES=0
CASES=0
fail() { printf 'FAIL: %s\n' "$*"; FAILURES=$((FAILURES + 1)); }
pass() { printf 'ok:   %s\n' "$*"; }
py() { "$MNDDP_PYTHON" "$@"; }

# data ARGS... : mnddp-data with a deadline; sets RC, OUT, ERR.
data() {
  timeout --kill-after=5 120 "$MNDDP_DATA_BIN" "$@" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# expect_ok NAME: the last mnddp-data run exited 0.
expect_ok() {
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ]; then pass "$1"; else fail "$1: exit $RC: $ERR"; fi
}

# expect_error NAME NEEDLE... : exit 2 and exactly one "mnddp-data: error:" line holding each NEEDLE.
expect_error() {
  local name=$1
  shift
  CASES=$((CASES + 1))
  if [ "$RC" != 2 ]; then fail "$name: exit $RC, expected 2: $ERR"; return; fi
  if [ "$(grep -c '^mnddp-data: error: ' <<<"$ERR")" != 1 ] || [ "$(wc -l <<<"$ERR")" != 1 ]; then
    fail "$name: expected one error line, got: $ERR"
    return
  fi
  for needle in "$@"; do
    if ! grep -qF -- "$needle" <<<"$ERR"; then fail "$name: message lacks '$needle': $ERR"; return; fi
  done
  pass "$name: $ERR"
}

if ! py -c 'import h5py, numpy' 2>"$WORK/err"; then
  echo "FAIL: $MNDDP_PYTHON cannot import h5py and numpy: $(tail -1 "$WORK/err")"
  exit 1
fi
FILES="$WORK/files"
py "$HERE/make_h5py_files.py" make "$FILES" || { echo "FAIL: make_h5py_files.py"; exit 1; }
manifest() { py -c "import json,sys; m=json.load(open('$FILES/manifest.json')); $1"; }

# 1. Exact values, stored bytes, labels and bad files through the library.
CASES=$((CASES + 1))
if MNDDP_INTEROP_DIR="$FILES" "$MNDDP_INTEROP_CHECK" >"$WORK/check" 2>&1; then
  pass "check_h5py_files: $(grep -c '^\[       OK' "$WORK/check") tests"
else
  fail "check_h5py_files"$'\n'"$(grep -v '^\[       OK\|^\[ RUN' "$WORK/check" | head -40)"
fi

# 2. mnddp-data inspect accepts every dtype and layout h5py writes.
while read -r name dtype first second; do
  data inspect "$first" "$second"
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && grep -qF "OK: 2 files, 30 samples of $dtype [3, 4]" <<<"$OUT"; then
    pass "inspect $name"
  else
    fail "inspect $name: exit $RC: $ERR $(tail -1 <<<"$OUT")"
  fi
done < <(manifest "[print(c['name'], c['dtype'], *c['files']) for c in m['cases']]")

# 3. Bad HDF5 files through inspect: exit 2, the file named.
while read -r file stage expect; do
  case $stage in
    read) data inspect "$file" --check-values ;;
    labels) data inspect "$file" --num-classes 10 ;;
    *) data inspect "$file" ;;
  esac
  expect_error "inspect $(basename "$file")" "$file" "$expect"
done < <(manifest "[print(b['file'], b['stage'], b['expect']) for b in m['bad']]")
data stats "$FILES/nan.h5" --out "$WORK/nan_stats.json"
expect_error "stats refuses NaN inputs" "$FILES/nan.h5" "non-finite"

# 4. convert -> reshard keeps every sample: order-free checksums of (x row, label) pairs.
checksum() { py "$HERE/make_h5py_files.py" checksum x y "$@"; }
while read -r name dtype count sum args; do
  read -r -a argv <<<"$args"
  data convert "${argv[@]}" --out "$WORK/c_$name" --shards 2
  expect_ok "convert $name"
  got=$(checksum "$WORK/c_$name"/train_*.h5)
  CASES=$((CASES + 1))
  if [ "$got" = "$count $dtype $sum" ]; then pass "convert $name keeps $count samples"; else
    fail "convert $name: got '$got', expected '$count $dtype $sum'"; fi
  data reshard "$WORK/c_$name" --out "$WORK/r_$name" --shards 3 --shuffle --seed 7 --compression gzip
  expect_ok "reshard $name"
  got=$(checksum "$WORK/r_$name"/shard_*.h5)
  CASES=$((CASES + 1))
  if [ "$got" = "$count $dtype $sum" ]; then pass "reshard $name keeps $count samples"; else
    fail "reshard $name: got '$got', expected '$count $dtype $sum'"; fi
done < <(manifest "[print(c['name'], c['dtype'], c['count'], c['checksum'], *c['args']) for c in m['conversions']]")

# Shuffling really reorders, the same seed gives the same files, shard sizes differ by at most 1.
data reshard "$WORK/c_npy_f4be" --out "$WORK/again" --shards 3 --shuffle --seed 7 --compression gzip
sizes=$(py -c "import h5py,sys; print(*[h5py.File(f)['y'].shape[0] for f in sys.argv[1:]])" "$WORK/again"/shard_*.h5)
CASES=$((CASES + 1))
if [ "$sizes" = "17 18 18" ]; then pass "53 samples into 3 shards: $sizes"; else fail "shard sizes $sizes"; fi
CASES=$((CASES + 1))
if py -c "
import h5py, numpy as np, sys
a = [h5py.File(f'$WORK/r_npy_f4be/shard_00{i}.h5')['y'][...] for i in range(3)]
b = [h5py.File(f'$WORK/again/shard_00{i}.h5')['y'][...] for i in range(3)]
c = [h5py.File(f'$WORK/c_npy_f4be/train_00{i}.h5')['y'][...] for i in range(2)]
same = all(np.array_equal(x, y) for x, y in zip(a, b))
sys.exit(0 if same and not np.array_equal(np.concatenate(a), np.concatenate(c)) else 1)"; then
  pass "reshard --shuffle: reordered, and reproducible for a seed"
else
  fail "reshard --shuffle is not a reproducible reordering"
fi

# 5. Bad conversion inputs.
while read -r file expect_and_args; do
  expect=${expect_and_args%%|*}
  read -r -a argv <<<"${expect_and_args#*|}"
  data convert "${argv[@]}" --out "$WORK/bad_convert"
  expect_error "convert $(basename "$file")" "$file" "$expect"
done < <(manifest "[print(b['file'], b['expect'] + '|' + ' '.join(b['args'])) for b in m['bad_conversions']]")

# 6. Outputs are never overwritten without --overwrite; stale shards go with it.
data convert --cifar10 "$FILES/convert/data_batch_1.bin" --out "$WORK/c_cifar10" --shards 2
expect_error "convert refuses to overwrite" "$WORK/c_cifar10/train_000.h5" "--overwrite"
data convert --cifar10 "$FILES/convert/data_batch_1.bin" --out "$WORK/c_cifar10" --overwrite
expect_ok "convert --overwrite"
CASES=$((CASES + 1))
if [ "$(ls "$WORK/c_cifar10")" = "train_000.h5" ]; then pass "stale train_001.h5 removed"; else
  fail "left in c_cifar10: $(ls "$WORK/c_cifar10" | tr '\n' ' ')"; fi
data stats "$WORK/c_idx" --out "$WORK/stats.json"
expect_ok "stats"
data stats "$WORK/c_idx" --out "$WORK/stats.json"
expect_error "stats refuses to overwrite" "$WORK/stats.json" "--overwrite"
CASES=$((CASES + 1))
if py -c "
import json, h5py, numpy as np, glob
s = json.load(open('$WORK/stats.json'))
x = np.concatenate([h5py.File(f)['x'][...] for f in sorted(glob.glob('$WORK/c_idx/*.h5'))]).astype('f8')
x = x.reshape(len(x), -1)
assert s['count'] == len(x) and s['sample_shape'] == [6, 5]
assert np.allclose(s['mean'], x.mean(0), rtol=1e-12, atol=1e-12), 'mean'
assert np.allclose(s['std'], x.std(0), rtol=1e-12, atol=1e-12), 'std'"; then
  pass "stats match numpy's mean and std"
else
  fail "stats differ from numpy"
fi
data reshard "$WORK/c_idx" --out "$WORK/c_idx" --shards 1 --prefix train --overwrite
expect_error "reshard refuses to write over its input" "--out" "is also an input"

# 7. Every subcommand has --help.
for command in synth convert reshard inspect stats; do
  data "$command" --help
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && grep -q "^usage: mnddp-data $command" <<<"$OUT"; then pass "$command --help"; else
    fail "$command --help: exit $RC"; fi
done

echo "$((CASES - FAILURES)) passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
