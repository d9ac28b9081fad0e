# mnddp plan end to end on synthetic data: a plan on one rank with its table, advice, JSON and
# plot; preflight --save-network's measured profile read back by plan; a training run's summary
# printing the plan's prediction beside its own step time (--plan); and bad options, each one line
# and exit code 2 (no model, a network file that does not parse or does not exist, --max-nodes 0, more
# than one rank, train --plan without its file, preflight --save-network on one rank).
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 512 --val-samples 64 --shards 2 --shape 3,16,16 >/dev/null
DATA=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --model convnet --hidden 16
  --batch-size 32 --threads 1 --metrics-file "")

# run_plan NP SECONDS args...: mnddp plan (under mpirun when NP > 0); sets RC, OUT, ERR, ELAPSED.
run_plan() {
  local np=$1 seconds=$(($2 * ${MNDDP_TEST_TIME_SCALE:-1}))
  shift 2
  local start=$SECONDS launcher=()
  ((np > 0)) && launcher=("$MPIEXEC" -np "$np" --oversubscribe)
  merge_options "$@"
  timeout --kill-after=5 "$seconds" "${launcher[@]}" "$MNDDP_BIN" plan "${MERGED[@]}" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  ELAPSED=$((SECONDS - start))
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# expect_plan NAME REGEX...: the last run exited 0 and its stdout matches every REGEX.
expect_plan() {
  local name=$1
  shift
  CASES=$((CASES + 1))
  if [ "$RC" != 0 ]; then fail "$name: exit code $RC"$'\n'"$OUT$ERR"; return 1; fi
  for regex in "$@"; do
    if ! grep -qE -- "$regex" <<<"$OUT"; then fail "$name: no line matches /$regex/"$'\n'"$OUT$ERR"; return 1; fi
  done
  pass "$name (${ELAPSED}s): $(grep -m1 '^advice: up to' <<<"$OUT")"
}

run_plan 0 120 "${DATA[@]}" --network h100-nvlink-ib400 --max-nodes 16 --plan-steps 5 --plan-warmup 2 \
  --json "$WORK/plan.json" --plot "$WORK/plan.png"
expect_plan "a plan on one rank" '^plan: convnet.* measured on cpu: step [0-9.]+ ms alone' \
  '^ +1 +8 +[0-9.]+ ms' '^ +16 +128 ' '^advice: --bucket-cap-mb [0-9]+' '^advice: --zero [012] ' \
  '^advice: (up to [0-9]+ nodes|under 80%)' '^advice: checkpoint every [0-9]+ steps' \
  '^plan: measured 5 steps' '^plan: memory per rank +parameters +gradients +optimizer +activations +buffers +total$' \
  '^  --zero 0, 1 node( +[0-9.]+ [KM]iB){5} +[0-9.]+ GiB'
CASES=$((CASES + 1))
if "$MNDDP_PYTHON" - "$WORK/plan.json" <<'PY' >"$WORK/check" 2>&1; then
import json, sys
plan = json.load(open(sys.argv[1]))
rows = plan["rows"]
assert [r["nodes"] for r in rows] == [1, 2, 4, 8, 16], rows
assert all(0 < r["efficiency"] <= 1.0 + 1e-9 for r in rows)
assert all(rows[i]["efficiency"] >= rows[i + 1]["efficiency"] - 1e-9 for i in range(len(rows) - 1))
m = rows[-1]["memory_bytes"]
# 128 ranks: a 1/128 share of the optimizer state at stages 1 and 2 (the snapshot's few other arrays
# aside); stage 2's gradients are a share plus the buckets in flight, here the whole small model.
assert m[0]["optimizer_state"] > 100 * m[1]["optimizer_state"] > 0 and m[1]["optimizer_state"] == m[2]["optimizer_state"], m
assert m[2]["gradients"] == m[0]["gradients"] / 128 + m[0]["gradients"], m
inputs = plan["inputs"]
assert len(inputs["step"]["ready_s"]) == len(inputs["step"]["gradient_bytes"]) > 0
assert max(inputs["step"]["ready_s"]) <= inputs["step"]["backward_s"] + 1e-9
print("ok")
PY
  pass "its JSON: a row per node count, efficiency falling, ZeRO splitting state, the measurement"
else
  fail "its JSON: $(cat "$WORK/check")"
fi
CASES=$((CASES + 1))
if [ -s "$WORK/plan.png" ] && [ "$(head -c 4 "$WORK/plan.png" | tail -c 3)" = PNG ]; then pass "its plot: a PNG"
else fail "its plot: no PNG at $WORK/plan.png"$'\n'"$OUT$ERR"; fi

# A network measured by preflight, read back by plan.
timeout --kill-after=5 120 "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" preflight "${DATA[@]}" --link-mb 1 \
  --slow-below 0.05 --save-network "$WORK/net.json" >"$WORK/out" 2>"$WORK/err"
RC=$?
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qE '^  network: within a node [0-9.]+ us a hop' "$WORK/out"; then
  pass "preflight --save-network: $(grep '^  network:' "$WORK/out")"
else
  fail "preflight --save-network: rc $RC"$'\n'"$(cat "$WORK/out" "$WORK/err")"
fi
run_plan 0 120 "${DATA[@]}" --network "$WORK/net.json" --max-nodes 2 --plan-steps 3 --plan-warmup 1
expect_plan "a plan on the measured network" '^plan: network measured on .* \(2 ranks a node over mpi\), 2 ranks a node'

# The training run's summary: the plan's prediction for its own layout beside what it measured.
run_mpi 2 120 "${DATA[@]}" --max-steps 12 --plan "$WORK/plan.json"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qE '^  plan +predicted [0-9.]+ ms a step on 2 ranks on 1 node \(h100-nvlink-ib400\), measured [0-9.]+ ms after 3 steps: [-+][0-9.]+%' <<<"$OUT"; then
  pass "train --plan: $(grep '^  plan ' <<<"$OUT" | sed 's/^ *//')"
else
  fail "train --plan: rc $RC"$'\n'"$OUT$ERR"
fi

# Bad options: one line, exit code 2.
run_plan 0 60 "${DATA[@]}" --model nosuch
expect_usage_error "no such model" "--model" "nosuch"
echo "{ not json" >"$WORK/bad.json"
run_plan 0 60 "${DATA[@]}" --network "$WORK/bad.json"
expect_usage_error "a network file that does not parse" "--network '$WORK/bad.json': not a JSON network profile"
run_plan 0 60 "${DATA[@]}" --network dgx
expect_usage_error "a network that is neither a file nor a reference" "--network 'dgx': neither a file nor a reference network (h200-nvlink-ib400,"
run_plan 0 60 "${DATA[@]}" --max-nodes 0
expect_usage_error "--max-nodes 0" "mnddp plan: --max-nodes 0 is outside [1, 65536]"
run_plan 2 60 "${DATA[@]}"
expect_usage_error "two ranks" "mnddp plan measures one rank and predicts the others"
timeout --kill-after=5 60 "$MNDDP_BIN" preflight "${DATA[@]}" --save-network "$WORK/one.json" >"$WORK/out" 2>"$WORK/err"
RC=$?
ERR=$(cat "$WORK/err")
expect_usage_error "preflight --save-network on one rank" "--save-network '$WORK/one.json' measures links between ranks"
run_mpi 2 60 "${DATA[@]}" --plan "$WORK/missing.json"
expect_usage_error "train --plan with no file" "--plan '$WORK/missing.json': no such file"
finish
