# mnddp preflight under mpirun (4 ranks): a fit setup passes with one line per rank; a rank slow in
# its transfers (--inject-slow-rank) is named, with its links and its host as --exclude= text, and
# exit code 5; a data file that is not there and a checkpoint directory that takes no file fail the
# same way; its own bad options are usage errors (2).
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 256 --val-samples 64 --shards 3 --shape 16 >/dev/null
DATA=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5")

# run_preflight NP SECONDS args...: as run_mpi, for `mnddp preflight`.
run_preflight() {
  local np=$1 seconds=$2
  shift 2
  local start=$SECONDS
  timeout --kill-after=5 "$seconds" "$MPIEXEC" -np "$np" --oversubscribe "$MNDDP_BIN" preflight --threads 1 "$@" \
    >"$WORK/out" 2>"$WORK/err"
  RC=$?
  ELAPSED=$((SECONDS - start))
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# expect_output NAME CODE REGEX...: the last run exited with CODE and its stdout matches every REGEX.
expect_output() {
  local name=$1 code=$2
  shift 2
  CASES=$((CASES + 1))
  if [ "$RC" != "$code" ]; then fail "$name: exit code $RC, expected $code"$'\n'"$OUT$ERR"; return; fi
  for regex in "$@"; do
    if ! grep -qE -- "$regex" <<<"$OUT"; then fail "$name: no line matches /$regex/"$'\n'"$OUT$ERR"; return; fi
  done
  pass "$name (${ELAPSED}s): $(grep -E '^preflight: (passed|FAILED)' <<<"$OUT" | cut -c1-160)"
}

# 4 ranks share 2 cores here, so links vary more than on a cluster: a looser threshold for the
# clean case (the injected one is ten times slower).
run_preflight 4 60 "${DATA[@]}" --checkpoint-dir "$WORK/ck" --slow-below 0.25
expect_output "a fit setup passes" 0 '^preflight: 4 ranks on 1 node\(s\), backend mpi' \
  '^  rank 0 +[^ ]+ +device cpu: a 4 MiB sum in [0-9.]+ ms; files 1 of 4 shards read' \
  '^  rank 3 +[^ ]+ +device cpu: .*; files 1 of 4 shards read' '^  checkpoint dir: writable, [0-9.]+ GiB free$' \
  '^  links \(16 MiB a transfer\): ring median [0-9.]+ GB/s, .*pairs median [0-9.]+ GB/s within a node, none across' \
  '^preflight: passed$'

run_preflight 4 60 "${DATA[@]}" --inject-slow-rank 2
expect_output "a rank slow in its transfers is named, and its host excluded" 5 \
  '^  slow link: rank 0 \([^)]+\) - rank 2 ' '^  slow link: rank 2 \([^)]+\) - rank 3 ' '^preflight: FAILED: rank 2 on [^ ]+: most of its links are slow$' \
  '^exclude: --exclude=[^ ,]+$'
CASES=$((CASES + 1))
# The pairs of 4 ranks: k = 1 (0-1, 2-3) and k = 2 (0-2, 1-3); rank 2 is in two of them.
if [ "$(grep -c '^  slow link:' <<<"$OUT")" = 2 ]; then pass "only rank 2's two pairs are slow"
else fail "slow links: $(grep '^  slow link:' <<<"$OUT")"; fi

run_preflight 2 60 --train-data "$WORK/data/nothing_*.h5" --val-data "" --slow-below 0.1
expect_output "data files that are not there" 5 "^  rank 0 .*files FAILED: --train-data: no HDF5 files match '$WORK/data/nothing_\*.h5'" \
  "^preflight: FAILED: ranks 0, 1 \([^)]+\): files: --train-data: no HDF5 files match '$WORK/data/nothing_\*.h5'\$"
CASES=$((CASES + 1))
if grep -q '^exclude:' <<<"$OUT"; then fail "a failure on every rank excluded nodes: $(grep '^exclude:' <<<"$OUT")"
else pass "a failure on every rank excludes no node"; fi

touch "$WORK/a_file"
run_preflight 2 60 "${DATA[@]}" --checkpoint-dir "$WORK/a_file/ck" --slow-below 0.1
expect_output "a checkpoint directory that takes no file" 5 "^  checkpoint dir: FAILED: .*$WORK/a_file/ck" \
  '^preflight: FAILED: checkpoint dir FAILED'

run_preflight 2 20 "${DATA[@]}" --link-mb 0
expect_usage_error "--link-mb 0" "mnddp preflight: --link-mb 0 is outside (0, 4096]"
finish
