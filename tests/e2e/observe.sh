# A run you can watch: the end-of-run summary table, the per-rank timeline (--trace) and its merge,
# TensorBoard's scalars (read back by TensorBoard itself), and the progress bar on a terminal (a pseudo-terminal from `script`) against plain interval lines
# when stdout is a file or a pipe.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:=python3}"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 512 --val-samples 64 --shards 2 --shape 32 >/dev/null
base=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --batch-size 16 --epochs 6
  --metrics-file "$WORK/metrics.jsonl" --checkpoint-dir "$WORK/ck" --checkpoint-interval 20 --log-interval 8
  --bucket-cap-mb 0.01 --first-bucket-mb 0.005)

# 1. The summary table, on a run with validation, asynchronous checkpoints and a trace.
run_mpi 2 300 "${base[@]}" --trace "$WORK/trace" --tensorboard "$WORK/tb"
traced_out=$OUT
CASES=$((CASES + 1))
if [ "$RC" != 0 ]; then fail "traced run: rc $RC"$'\n'"$(tail -5 <<<"$ERR$OUT")"; fi
table=$(sed -n '/^run summary$/,$p' <<<"$OUT")
verdict=$(python3 - "$table" "$WORK" 2>&1 <<'PY'
import re, sys
table, work = sys.argv[1], sys.argv[2]
def line(start):
    found = [l.strip() for l in table.splitlines() if l.strip().startswith(start)]
    if len(found) != 1:
        sys.exit(f"{len(found)} '{start}' lines in the summary:\n{table}")
    return found[0]
line("wall time")
steps = line("steps")
if not steps.startswith("steps          96 of 96 (96 this run, epoch 5)"):
    sys.exit(f"steps line: {steps}")
if not re.search(r"[0-9]+ samples/s$", steps):
    sys.exit(f"no samples/s: {steps}")
step = float(re.search(r"step time +([0-9.]+) ms per step, mean over 2 ranks", line("step time")).group(1))
shares = 0.0
for phase in ["data wait", "forward", "backward", "exposed comm", "optimizer", "other"]:
    m = re.match(rf"{phase} +([0-9.]+) ms +([0-9.]+)%", line(phase))
    if not m:
        sys.exit(f"phase line: {line(phase)}")
    shares += float(m.group(2))
    if phase != "other" and not re.search(r"rank [01] \(.+\): [0-9.]+ ms$", line(phase)):
        sys.exit(f"no rank named: {line(phase)}")
if abs(shares - 100.0) > 0.5:
    sys.exit(f"the phases' shares add up to {shares:.1f}%")
if not re.match(r"outside steps +validation .* \(6 passes\), checkpoints .*, logging", line("outside steps")):
    sys.exit(line("outside steps"))
if not re.match(r"validation +final accuracy [0-9.]+ at step 96; best [0-9.]+ at step [0-9]+$", line("validation")):
    sys.exit(line("validation"))
if f"{work}/ck/step-00000096.h5 (the last)" not in line("checkpoints"):
    sys.exit(line("checkpoints"))
if f"{work}/metrics.jsonl" not in line("metrics") or f"mnddp trace merge {work}/trace" not in line("trace"):
    sys.exit(line("metrics") + "\n" + line("trace"))
if f"tensorboard --logdir {work}/tb" not in line("tensorboard"):
    sys.exit(line("tensorboard"))
if not re.match(r"start-up +slowest rank [01] \(.+\): .*: libraries .*first batch", line("start-up")):
    sys.exit(line("start-up"))
import json
summaries = [json.loads(l) for l in open(f"{work}/metrics.jsonl") if '"kind":"summary"' in l]
if len(summaries) != 1 or summaries[0]["step"] != 96 or abs(summaries[0]["step_time_s"] * 1e3 - step) > 0.006:
    sys.exit(f"the metrics file's summary lines: {summaries}")
if set(summaries[0]["phases"]) != {"data_wait", "forward", "backward", "exposed_comm", "optimizer"}:
    sys.exit(f"the summary line's phases: {summaries[0]['phases']}")
print(f"{step} ms per step, the shares add up to {shares:.1f}%; the same in metrics.jsonl")
PY
)
if [ $? = 0 ]; then pass "summary table: $verdict"; else fail "summary table: $verdict"; fi

# 2. The trace: valid JSON per rank, every kind of event, all-reduces issued inside backward; merged.
CASES=$((CASES + 1))
if merged=$("$MNDDP_BIN" trace merge "$WORK/trace" 2>&1) &&
  result=$("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/check_trace.py" "$WORK/trace" 2 \
    --merged "$WORK/trace/merged.trace.json" 2>&1); then
  pass "trace: $merged; $(tr '\n' ' ' <<<"$result")"
else
  fail "trace: $merged"$'\n'"$result"
fi
"$MNDDP_BIN" trace merge "$WORK/nowhere" >/dev/null 2>"$WORK/merge.err"
RC=$? ERR=$(cat "$WORK/merge.err") ELAPSED=0
expect_usage_error "trace merge of a missing directory" "'$WORK/nowhere' is not a directory"

# 2b. TensorBoard: its reader finds every tag at the metrics file's steps, with its values.
CASES=$((CASES + 1))
if result=$("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/check_tensorboard.py" "$WORK/tb" "$WORK/metrics.jsonl" 2>&1); then
  pass "tensorboard: $result"
else
  fail "tensorboard: $result"
fi

# 2c. Resumed from an earlier checkpoint into the same TensorBoard directory: the steps after the
# checkpoint are logged again, and TensorBoard keeps only the resumed run's (a session start at the
# resumed step): its view equals the first run's metrics up to the checkpoint, then the second's.
CASES=$((CASES + 1))
tb_run=("${base[@]}" --epochs 3 --val-data "$WORK/data/val_*.h5" --tensorboard "$WORK/tb2" --checkpoint-dir "$WORK/ck2"
  --checkpoint-interval 16)
run_mpi 2 300 "${tb_run[@]}" --metrics-file "$WORK/first.jsonl"
first_rc=$RC
run_mpi 2 300 "${tb_run[@]}" --metrics-file "$WORK/second.jsonl" --resume "$WORK/ck2/step-00000016.h5"
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
first = [json.loads(l) for l in open(f"{work}/first.jsonl")]
second = [json.loads(l) for l in open(f"{work}/second.jsonl")]
with open(f"{work}/combined.jsonl", "w") as out:
    for r in first:
        if r["kind"] in ("train", "eval") and r["step"] <= 16:
            out.write(json.dumps(r) + "\n")
    for r in second:
        out.write(json.dumps(r) + "\n")
PY
if [ "$first_rc" = 0 ] && [ "$RC" = 0 ] &&
  result=$("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/check_tensorboard.py" "$WORK/tb2" "$WORK/combined.jsonl" 2>&1); then
  pass "tensorboard after a resume from step 16: $result"
else
  fail "tensorboard after a resume from step 16 (rc $first_rc, $RC): $result"
fi

# 3. Not a terminal (run 1 went to a file): interval lines, no escape codes.
CASES=$((CASES + 1))
lines=$(grep -c 'step [0-9]*/96: loss' <<<"$traced_out")
if [ "$lines" = 12 ] && ! grep -q $'\033' <<<"$traced_out"; then pass "stdout a file: $lines interval lines, no escape codes"
else fail "stdout a file: $lines interval lines (expected 12), escape codes: $(grep -c $'\033' <<<"$traced_out")"; fi

# 4. A terminal: the bar redrawn in place on rank 0, log lines above it, no interval lines. mpirun
# gives its ranks a pseudo-terminal whatever its own stdout is: what counts is mpirun's.
CASES=$((CASES + 1))
merge_options --threads 1 "${base[@]}" --checkpoint-dir "$WORK/ck-tty" --metrics-file "" --checkpoint-interval 0
printf -v command '%q ' "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train "${MERGED[@]}"
COLUMNS=120 timeout --kill-after=5 300 script -qefc "stty cols 120; $command" /dev/null >"$WORK/tty.out" 2>&1
RC=$?
redraws=$(grep -o $'\r\033\[K' "$WORK/tty.out" | wc -l)
final=$(grep -ao 'step 96/96 epoch 5 \[#*\] 100% [0-9]* samples/s loss [0-9.]* data wait [0-9]*% ETA 0:00' \
  "$WORK/tty.out" | tail -1)
intervals=$(grep -ac 'step [0-9]*/96: loss' "$WORK/tty.out")
if [ "$RC" = 0 ] && [ "$redraws" -ge 12 ] && [ -n "$final" ] && [ "$intervals" = 0 ] &&
  grep -aq 'validation loss' "$WORK/tty.out" && grep -aq '^run summary' "$WORK/tty.out"; then
  pass "terminal: bar redrawn $redraws times, last: '$final'; no interval lines; log and summary below"
else
  fail "terminal: rc $RC, $redraws redraws, final '$final', $intervals interval lines"$'\n'"$(tail -c 2000 "$WORK/tty.out" | cat -v)"
fi
finish
