# A run resumed on another world size keeps the checkpoint's global batch and sample order, and its
# dropout masks follow the samples (keyed by seed, step and sample index), not the ranks: 4 ranks x 6
# stop at step 8; the same command on 2 ranks goes on with --grad-accum-steps 2 to step 16, and on 3
# ranks with --batch-size 4 and --grad-accum-steps 2 to step 24. Every step's loss, and the final
# parameters and AdamW state, must equal an uninterrupted 4-rank run's up to summation order:
# a loss within 1e-5 relative (measured below 1e-6), an array within 1e-4 of its largest value.
# Then what cannot keep it: 5 ranks are refused (exit 2, naming the world sizes that can), and go on
# with --allow-batch-change, which says what changes.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}"

"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 1200 --val-samples 64 --shards 2 --shape 24 \
  --classes 4 --noise 2 --seed 3 >/dev/null
"$MNDDP_DATA_BIN" synth --task lm --vocab 32 --shape 17 --out "$WORK/lm" --train-samples 600 --val-samples 32 \
  --shards 2 --seed 5 >/dev/null
COMMON=(--max-steps 24 --epochs 2 --log-interval 1 --checkpoint-async false --checkpoint-interval 0
  --val-data "" --batch-size 6 --optimizer adamw --lr 0.01 --lr-schedule cosine --seed 7)
MLP=(--train-data "$WORK/img/train_*.h5" --num-classes 4 --hidden 32 --layers 2 --dropout 0.3)
# gpt: dropout on the embeddings, in every block and on the attention weights.
GPT=(--task lm --model gpt --hidden 32 --layers 2 --heads 2 --dropout 0.2 --train-data "$WORK/lm/train_*.h5")

# train NAME NP OPTIONS...: into $WORK/NAME (checkpoints) and $WORK/NAME.NP.jsonl (the step losses).
train() {
  local name=$1 np=$2
  shift 2
  run_mpi "$np" 150 "${COMMON[@]}" --checkpoint-dir "$WORK/$name" --metrics-file "$WORK/$name.$np.jsonl" "$@"
  if [ "$RC" != 0 ]; then
    fail "$name on $np ranks: rc $RC"$'\n'"$ERR"
    return 1
  fi
}

# same_run REFERENCE NAME: NAME's step losses (all its invocations) and its final checkpoint
# against REFERENCE's.
same_run() {
  local reference=$1 name=$2
  CASES=$((CASES + 1))
  local verdict
  verdict=$("$MNDDP_PYTHON" - "$WORK" "$reference" "$name" <<'PY'
import glob, json, sys, h5py, numpy as np
work, ref_name, name = sys.argv[1:]
def losses(run):
    out = {}
    for path in glob.glob(f"{work}/{run}.*.jsonl"):
        for line in open(path):
            m = json.loads(line)
            if "loss" in m and m.get("kind", "train") == "train":
                out[m["step"]] = m["loss"]
    return out
def arrays(run):
    out = {}
    with h5py.File(f"{work}/{run}/step-00000024.h5", "r") as f:
        for group in ("model", "optimizer"):
            f[group].visititems(lambda n, o: out.__setitem__(f"{group}/{n}", o[()]) if isinstance(o, h5py.Dataset) else None)
    for key in out:
        if "c_attn.bias" in key and np.ndim(out[key]) == 1:
            # The key projection's bias (the middle third) shifts every score of a query alike, which
            # the softmax cancels: its gradient is 0 in exact arithmetic, so AdamW steps it on noise.
            n = out[key].shape[0] // 3
            out[key] = np.concatenate([out[key][:n], out[key][2 * n:]])
    return out
ref, got = losses(ref_name), losses(name)
if sorted(ref) != list(range(1, 25)) or sorted(got) != sorted(ref):
    print(f"FAIL steps logged: {sorted(ref)} and {sorted(got)}"); sys.exit()
loss = max(abs(ref[s] - got[s]) / abs(ref[s]) for s in ref)
a, b = arrays(ref_name), arrays(name)
if sorted(a) != sorted(b):
    print("FAIL different arrays"); sys.exit()
def distance(k):
    return float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k]))) / max(float(np.max(np.abs(a[k]))), 1e-2)
far = max(a, key=distance)
array = distance(far)
worst = max(range(1, 25), key=lambda s: abs(ref[s] - got[s]) / abs(ref[s]))
ok = loss <= 1e-5 and array <= 1e-4
print(f"{'ok' if ok else 'FAIL'} losses of 24 steps within {loss:.2g} relative (worst at step {worst}: "
      f"{ref[worst]:.7f} vs {got[worst]:.7f}), {len(a)} arrays within {array:.2g} (worst: {far})")
PY
)
  if [[ $verdict == ok* ]]; then pass "$name follows $reference: ${verdict#ok }"; else fail "$name against $reference: $verdict"; fi
}

# expect_in_output NAME NEEDLE: the last run printed NEEDLE.
expect_in_output() {
  CASES=$((CASES + 1))
  if grep -qF -- "$2" <<<"$OUT$ERR"; then pass "$1"; else fail "$1: no '$2' in"$'\n'"$OUT$ERR"; fi
}

for model in mlp gpt; do
  if [ "$model" = mlp ]; then OPTIONS=("${MLP[@]}"); else OPTIONS=("${GPT[@]}"); fi
  train "$model-straight" 4 "${OPTIONS[@]}" || continue
  train "$model-resized" 4 "${OPTIONS[@]}" --steps-per-run 8 || continue
  train "$model-resized" 2 "${OPTIONS[@]}" --steps-per-run 8 || continue
  expect_in_output "$model: 4 -> 2 ranks says what it changed" \
    "resume on 2 ranks: --grad-accum-steps 1 -> 2 keeps the checkpoint's global batch of 24"
  train "$model-resized" 3 "${OPTIONS[@]}" || continue
  expect_in_output "$model: 2 -> 3 ranks says what it changed" \
    "resume on 3 ranks: --batch-size 6 -> 4 and --grad-accum-steps 1 -> 2 keeps the checkpoint's global batch of 24"
  same_run "$model-straight" "$model-resized"
done

# 24 samples per step cannot be shared by 5 ranks: refused, naming what can; with
# --allow-batch-change the run goes on with 30 and says so.
cp -r "$WORK/mlp-resized" "$WORK/mlp-five"
run_mpi 5 150 "${COMMON[@]}" "${MLP[@]}" --checkpoint-dir "$WORK/mlp-five" --metrics-file "" \
  --resume "$WORK/mlp-five/step-00000008.h5"
expect_usage_error "5 ranks cannot keep a global batch of 24" "--resume '$WORK/mlp-five/step-00000008.h5'" \
  "global batch of 24 samples (4 ranks x --batch-size 6 x --grad-accum-steps 1)" "run on 1, 2, 3, 4, 6, 8, 12, 24 ranks" \
  "--allow-batch-change"
CASES=$((CASES + 1))
if [ -f "$WORK/mlp-five/step-00000024.h5" ]; then
  pass "... and the refused resume set nothing aside (step 24 is still there)"
else
  fail "the refused resume renamed the newer checkpoints: $(ls "$WORK/mlp-five")"
fi
run_mpi 5 150 "${COMMON[@]}" "${MLP[@]}" --checkpoint-dir "$WORK/mlp-five" --metrics-file "" --max-steps 10 \
  --resume "$WORK/mlp-five/step-00000008.h5" --allow-batch-change
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qF "global batch changes from 24" <<<"$OUT$ERR" &&
  grep -qF "resumed from '$WORK/mlp-five/step-00000008.h5': step 8" <<<"$OUT"; then
  pass "--allow-batch-change goes on with 30 samples per step and says so"
else
  fail "--allow-batch-change (rc $RC): $OUT $ERR"
fi

# --partition shard deals files by world size: 2 ranks -> 1 restarts the epoch (with the flag).
train shard 2 "${MLP[@]}" --partition shard --steps-per-run 5
run_mpi 1 150 "${COMMON[@]}" "${MLP[@]}" --partition shard --checkpoint-dir "$WORK/shard" --metrics-file "" \
  --max-steps 8 --allow-batch-change
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && grep -qF "the epoch in progress restarts from its beginning in a new order on 1 ranks" <<<"$OUT$ERR" &&
  grep -qF "step 5, epoch 0, 0 samples into the epoch" <<<"$OUT"; then
  pass "--partition shard on another world size with --allow-batch-change restarts the epoch"
else
  fail "--partition shard, 2 -> 1 ranks (rc $RC): $OUT $ERR"
fi
finish
