# --model torchscript:PATH end to end, with the venv's torch: a model scripted in Python
# (examples/torchscript/make_model.py: BatchNorm and dropout) trains on 2 ranks, and its `mnddp export`
# loaded back into the Python class predicts the validation set with exactly the accuracy mnddp
# printed (which also shows eval mode reached the scripted module). Also: a traced MLP, a model with
# an unused branch and a frozen weight (their parameters never change), a token model for --task lm, a bitwise resume, two
# identical runs giving identical loss logs, and the errors for a file that is not TorchScript and an
# output that does not fit the task.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"
MODELS=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/torchscript_models.py")

"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 2048 --val-samples 512 --shards 2 --shape 1,12,12 \
  --classes 6 --noise 1.2 >/dev/null
DATA=(--train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" --num-classes 6)
SHAPE=(--shape 1,12,12 --classes 6)
"${MODELS[@]}" write convnet "$WORK/net.pt" "${SHAPE[@]}"
RUN=("${DATA[@]}" --model "torchscript:$WORK/net.pt" --optimizer adamw --lr 0.01 --batch-size 32 --max-steps 48
  --log-interval 8)

# metric NAME FILE: NAME in the last eval line of a metrics file.
metric() { grep '"kind":"eval"' "$2" | tail -1 | grep -o "\"$1\":[-0-9.e+]*" | cut -d: -f2; }
# losses FILE: the train losses, in order.
losses() { grep '"kind":"train"' "$1" | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2 | tr '\n' ' '; }
# loss_fell FILE: the last logged train loss is below 0.8 of the first.
loss_fell() {
  local l
  l=$(losses "$1")
  awk -v l="$l" 'BEGIN{n=split(l, a, " "); exit !(n >= 2 && a[n] < 0.8 * a[1])}'
}

run_mpi 2 300 "${RUN[@]}" --checkpoint-dir "$WORK/ckpt" --metrics-file "$WORK/train.jsonl"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && loss_fell "$WORK/train.jsonl" && grep -q "model torchscript:$WORK/net.pt: [0-9]* parameters" <<<"$ERR$OUT"; then
  pass "scripted convnet: 2 ranks x 48 steps, loss $(losses "$WORK/train.jsonl")"
else
  fail "scripted convnet did not train (rc $RC): $(losses "$WORK/train.jsonl")"$'\n'"$ERR"
fi
CASES=$((CASES + 1))
acc=$(metric accuracy "$WORK/train.jsonl")
if "$MNDDP_BIN" export --checkpoint "$WORK/ckpt/$(cat "$WORK/ckpt/latest")" --out "$WORK/export.pt" >/dev/null &&
  python_count=$("${MODELS[@]}" accuracy "$WORK/export.pt" "$WORK/img/val_*.h5" "${SHAPE[@]}") &&
  awk -v acc="$acc" -v pc="$python_count" 'BEGIN{split(pc, a, " "); exit !(acc != "" && a[1] == acc * a[2])}'; then
  pass "export loaded into the Python module (strict state dict): $python_count correct, mnddp printed $acc"
else
  fail "export in Python: '$python_count' correct vs mnddp accuracy '$acc'"
fi

# The same run again: bitwise the same loss log (dropout, BatchNorm, 2 ranks).
run_mpi 2 300 "${RUN[@]}" --metrics-file "$WORK/again.jsonl"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(losses "$WORK/train.jsonl")" = "$(losses "$WORK/again.jsonl")" ] &&
  [ "$(metric loss "$WORK/train.jsonl")" = "$(metric loss "$WORK/again.jsonl")" ]; then
  pass "two identical runs: identical loss logs"
else
  fail "two identical runs differ: $(losses "$WORK/train.jsonl") vs $(losses "$WORK/again.jsonl")"
fi

round_trip torchscript "${RUN[@]}" --max-steps 16 --log-interval 4

"${MODELS[@]}" write traced "$WORK/traced.pt" "${SHAPE[@]}"
run_mpi 2 300 "${RUN[@]}" --model "torchscript:$WORK/traced.pt" --metrics-file "$WORK/traced.jsonl"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && loss_fell "$WORK/traced.jsonl"; then
  pass "traced MLP trains: $(losses "$WORK/traced.jsonl")"
else
  fail "traced MLP (rc $RC): $(losses "$WORK/traced.jsonl")"$'\n'"$ERR"
fi

# An unused branch: training works with and without --find-unused-parameters, and the branch's
# parameters (no gradient on any rank) stay exactly as scripted.
"${MODELS[@]}" write unused_branch "$WORK/unused.pt" "${SHAPE[@]}"
for find in false true; do
  run_mpi 2 300 "${RUN[@]}" --model "torchscript:$WORK/unused.pt" --find-unused-parameters "$find" \
    --checkpoint-dir "$WORK/unused-$find" --metrics-file "$WORK/unused-$find.jsonl"
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && loss_fell "$WORK/unused-$find.jsonl" &&
    "$MNDDP_BIN" export --checkpoint "$WORK/unused-$find/$(cat "$WORK/unused-$find/latest")" \
      --out "$WORK/unused-$find.pt" >/dev/null &&
    msg=$("${MODELS[@]}" unchanged "$WORK/unused-$find.pt" "$WORK/unused.pt" aux. 2>&1); then
    pass "unused branch, --find-unused-parameters $find: trains, $msg"
  else
    fail "unused branch, --find-unused-parameters $find (rc $RC): ${msg:-}"$'\n'"$ERR"
  fi
done

# A parameter frozen in Python (requires_grad=False) stays frozen.
"${MODELS[@]}" write frozen "$WORK/frozen.pt" "${SHAPE[@]}"
run_mpi 2 300 "${RUN[@]}" --model "torchscript:$WORK/frozen.pt" --max-steps 8 --checkpoint-dir "$WORK/frozen" \
  --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 0 ] &&
  "$MNDDP_BIN" export --checkpoint "$WORK/frozen/$(cat "$WORK/frozen/latest")" --out "$WORK/frozen-export.pt" >/dev/null &&
  msg=$("${MODELS[@]}" unchanged "$WORK/frozen-export.pt" "$WORK/frozen.pt" features.0. 2>&1); then
  pass "requires_grad=False in Python: $msg, the rest trained"
else
  fail "frozen parameter (rc $RC): ${msg:-}"$'\n'"$ERR"
fi

# A token model for --task lm: int64 ids in, [N, T, vocab] logits out.
"$MNDDP_DATA_BIN" synth --task lm --vocab 32 --shape 17 --out "$WORK/lm" --train-samples 1024 --val-samples 128 \
  --shards 2 >/dev/null
"${MODELS[@]}" write lm "$WORK/lm.pt" --classes 32
LM=(--task lm --vocab-size 32 --model "torchscript:$WORK/lm.pt" --train-data "$WORK/lm/train_*.h5"
  --val-data "$WORK/lm/val_*.h5" --optimizer adamw --lr 0.01 --batch-size 16 --max-steps 48 --log-interval 8)
run_mpi 2 300 "${LM[@]}" --metrics-file "$WORK/lm.jsonl"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && loss_fell "$WORK/lm.jsonl" && awk -v p="$(metric perplexity "$WORK/lm.jsonl")" 'BEGIN{exit !(p < 8)}'; then
  pass "scripted lm: loss $(losses "$WORK/lm.jsonl"), perplexity $(metric perplexity "$WORK/lm.jsonl") (chance 32)"
else
  fail "scripted lm (rc $RC): $(losses "$WORK/lm.jsonl")"$'\n'"$ERR"
fi

# Files and modules that do not fit: one clear line each, exit 2, on both ranks.
printf 'not a model\n' >"$WORK/text.pt"
run_mpi 2 60 "${RUN[@]}" --model "torchscript:$WORK/text.pt"
expect_usage_error "a text file" "--model torchscript:$WORK/text.pt: not a TorchScript module" "torch.jit.script"
"${MODELS[@]}" write state_dict "$WORK/weights.pt" "${SHAPE[@]}"
run_mpi 2 60 "${RUN[@]}" --model "torchscript:$WORK/weights.pt"
expect_usage_error "a torch.save state dict" \
  "--model torchscript:$WORK/weights.pt: not a TorchScript module but a torch.save file"
run_mpi 2 60 "${RUN[@]}" --model "torchscript:$WORK/missing.pt"
expect_usage_error "a missing file" "--model torchscript:$WORK/missing.pt: no such file"
"${MODELS[@]}" write wrong_output "$WORK/wrong.pt" "${SHAPE[@]}"
run_mpi 2 60 "${RUN[@]}" --model "torchscript:$WORK/wrong.pt"
expect_usage_error "an output that does not fit" "forward(x [2, 1, 12, 12] float32) returned [2, 3]" \
  "--task classification with 6 classes needs [2, 6]"
run_mpi 2 60 "${LM[@]}" --model "torchscript:$WORK/net.pt"
expect_usage_error "an image model on tokens" "--model torchscript:$WORK/net.pt: forward(x [2, 16] int64) failed:"

finish
