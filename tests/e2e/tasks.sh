# The three tasks end to end on 2 ranks (and checkpoint round trips of gpt, vit, cnn3d and resnet18): regression with 3 targets (R² per target), language
# modelling with GPT on Markov-chain tokens (the loss far below log(vocab)), classification with
# label smoothing (top-5 reported); and the errors for data or models that do not fit the task.
source "$(dirname "$0")/lib.sh"

# final_metric NAME: the value of "final validation NAME: X" in the last run's stdout.
final_metric() { grep -o "final validation $1: [-0-9.e+]*" <<<"$OUT" | awk '{print $4}'; }
# check NAME CONDITION(awk, on v) VALUE
check() {
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$3" ] && awk -v v="$3" "BEGIN{exit !($2)}"; then
    pass "$1: $3 ($2)"
  else
    fail "$1: '$3' does not satisfy $2 (rc $RC)"$'\n'"$OUT"$'\n'"$ERR"
  fi
}

"$MNDDP_DATA_BIN" synth --task regression --targets 3 --shape 16 --noise 0.1 --out "$WORK/reg" \
  --train-samples 4096 --val-samples 1024 --shards 2 >/dev/null
REG=(--task regression --model mlp --hidden 64 --optimizer adamw --lr 0.003 --epochs 4 --batch-size 32
  --train-data "$WORK/reg/train_*.h5" --val-data "$WORK/reg/val_*.h5" --metrics-file "$WORK/reg.jsonl")
run_mpi 2 300 "${REG[@]}"
check "regression r2" 'v >= 0.9' "$(final_metric r2)"
for j in 0 1 2; do check "regression r2_$j" 'v >= 0.85' "$(final_metric r2_$j)"; done
check "regression mae" 'v > 0 && v < 0.3' "$(final_metric mae)"
CASES=$((CASES + 1))
line=$(grep '"kind":"eval"' "$WORK/reg.jsonl" | tail -1)
if grep -q '"r2_2"' <<<"$line" && grep -q '"mse"' <<<"$line" && grep -q '"mae_0"' <<<"$line"; then
  pass "regression metrics in the JSONL file"
else
  fail "regression metrics JSONL: $line"
fi
run_mpi 2 300 "${REG[@]}" --loss huber --huber-delta 0.5 --metrics-file ""
check "regression (huber) r2" 'v >= 0.9' "$(final_metric r2)"

"$MNDDP_DATA_BIN" synth --task lm --vocab 64 --shape 33 --out "$WORK/lm" --train-samples 2048 --val-samples 256 \
  --shards 2 >/dev/null
LM=(--task lm --model gpt --hidden 64 --layers 2 --heads 4 --optimizer adamw --lr 0.003 --epochs 3 --batch-size 16
  --train-data "$WORK/lm/train_*.h5" --val-data "$WORK/lm/val_*.h5" --metrics-file "")
run_mpi 2 400 "${LM[@]}"
# log(64) = 4.16 is chance; the chain's floor is log(2) = 0.69.
check "lm loss" 'v < 1.2' "$(final_metric loss)"
check "lm perplexity" 'v < 3.3' "$(final_metric perplexity)"
CASES=$((CASES + 1))
if grep -q 'reading every training token' <<<"$ERR$OUT" && grep -q 'model gpt: ' <<<"$ERR$OUT"; then
  pass "lm: the vocabulary derived from the data, the parameter count printed"
else
  fail "lm: no vocabulary scan or parameter count in the log"$'\n'"$ERR"
fi

"$MNDDP_DATA_BIN" synth --out "$WORK/cls" --train-samples 2048 --val-samples 512 --shards 2 --shape 32 --classes 8 \
  --noise 1.6 >/dev/null
CLS=(--train-data "$WORK/cls/train_*.h5" --val-data "$WORK/cls/val_*.h5" --num-classes 8 --metrics-file "")
run_mpi 2 300 "${CLS[@]}" --label-smoothing 0.1 --epochs 2 --eval-interval 5 --metrics-file "$WORK/cls.jsonl"
check "classification (label smoothing) accuracy" 'v >= 0.8' "$(final_metric accuracy)"
check "classification top-5 >= top-1" "v >= $(final_metric accuracy)" "$(final_metric top5_accuracy)"
# 2048 / (2 x 64) = 16 steps an epoch, 32 in all: --eval-interval 5 validates at 5, 10, 15, 16 (the
# epoch's end), 20, 25, 30 and 32 (the end), each once.
CASES=$((CASES + 1))
evals=$(grep '"kind":"eval"' "$WORK/cls.jsonl" | grep -o '"step":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
if [ "$evals" = "5 10 15 16 20 25 30 32 " ]; then pass "--eval-interval 5: validated at steps $evals"; else fail "--eval-interval 5: validated at steps '$evals'"; fi

# Checkpoints of the new models (round_trip, lib.sh): GPT with dropout (the RNG matters), ResNet-18
# with its BatchNorm buffers (with AdamW, and with LARS and its two param groups).
"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 256 --val-samples 64 --shards 2 --shape 3,8,8 --classes 4 \
  >/dev/null
round_trip gpt "${LM[@]}" --dropout 0.1 --max-steps 16 --log-interval 4
round_trip vit --model vit --hidden 32 --layers 2 --heads 4 --patch-size 4 --dropout 0.1 \
  --train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" --num-classes 4 --optimizer adamw --lr 0.001 \
  --batch-size 8 --max-steps 16 --log-interval 4
round_trip resnet18 --model resnet18 --train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" \
  --num-classes 4 --optimizer adamw --lr 0.001 --batch-size 8 --max-steps 16 --log-interval 4
# LARS as MLPerf trains ResNet-50: BatchNorm weights and biases in the group without trust ratio.
round_trip resnet18-lars --model resnet18 --train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" \
  --num-classes 4 --optimizer lars --lr 1 --lars-eta 0.01 --weight-decay 0.0001 --warmup-steps 4 --batch-size 8 \
  --max-steps 16 --log-interval 4

# CNN3D (CosmoFlow) on volumes [1, 4, 4, 4] with 4 regression targets (synth's targets are linear in
# white-noise voxels, which pooling blurs: r2 0.51 here, 0.0 on [2, 8, 8, 8]), and ViT on images: each
# learns on 2 ranks; cnn3d also round-trips its checkpoint.
"$MNDDP_DATA_BIN" synth --task regression --targets 4 --shape 1,4,4,4 --noise 0.1 --out "$WORK/vol" \
  --train-samples 4096 --val-samples 512 --shards 2 >/dev/null
VOL=(--task regression --model cnn3d --hidden 16 --layers 2 --optimizer adamw --lr 0.002 --batch-size 32
  --train-data "$WORK/vol/train_*.h5" --val-data "$WORK/vol/val_*.h5" --metrics-file "")
run_mpi 2 300 "${VOL[@]}" --epochs 4
check "cnn3d regression r2" 'v >= 0.3' "$(final_metric r2)"
round_trip cnn3d "${VOL[@]}" --dropout 0.2 --max-steps 16 --log-interval 4
"$MNDDP_DATA_BIN" synth --out "$WORK/img16" --train-samples 2048 --val-samples 512 --shards 2 --shape 3,16,16 \
  --classes 6 --noise 1.5 >/dev/null
run_mpi 2 300 --model vit --hidden 48 --layers 2 --heads 4 --patch-size 4 --optimizer adamw --lr 0.002 --epochs 3 \
  --batch-size 32 --train-data "$WORK/img16/train_*.h5" --val-data "$WORK/img16/val_*.h5" --num-classes 6 \
  --metrics-file ""
check "vit classification accuracy" 'v >= 0.6' "$(final_metric accuracy)"

# nanoGPT's flat uint16 token file -> [N, T] shards: every token in place, the tail left out.
"$MNDDP_PYTHON" -c "import numpy as np; np.random.default_rng(3).integers(0, 50257, 10000).astype(np.uint16).tofile('$WORK/train.bin')"
"$MNDDP_DATA_BIN" convert --tokens "$WORK/train.bin" --sequence-length 33 --shards 2 --out "$WORK/tok" >"$WORK/conv.out" 2>&1
CASES=$((CASES + 1))
if "$MNDDP_PYTHON" - "$WORK" <<'PY' >"$WORK/tok.check" 2>&1 && grep -q "303 sequences of 33, 1 tokens at the end left out" "$WORK/conv.out"; then
import sys, glob, h5py, numpy as np
work = sys.argv[1]
flat = np.fromfile(f"{work}/train.bin", dtype=np.uint16)
parts = []
for path in sorted(glob.glob(f"{work}/tok/train_*.h5")):
    with h5py.File(path) as f:
        assert "y" not in f and f["x"].dtype == np.uint16, list(f)
        parts.append(f["x"][...])
x = np.concatenate(parts)
assert x.shape == (303, 33), x.shape
assert (x.reshape(-1) == flat[:303 * 33]).all()
PY
  pass "convert --tokens: 10000 uint16 tokens -> 303 sequences of 33 in 2 shards, every token in place, no y"
else
  fail "convert --tokens: $(cat "$WORK/conv.out" "$WORK/tok.check")"
fi

# inspect says which task each dataset fits.
for pair in "reg/train_000.h5|float32 targets, 3 per sample: fits --task regression" \
  "lm/train_000.h5|no labels: fits --task lm (--vocab-size 64 or more, --context up to 32)" \
  "tok/train_001.h5|no labels: fits --task lm (--vocab-size" \
  "cls/train_000.h5|integer labels in [0, 7]: fits --task classification (--num-classes 8 or more)"; do
  CASES=$((CASES + 1))
  out=$("$MNDDP_DATA_BIN" inspect "$WORK/${pair%%|*}" 2>&1)
  if grep -qF -- "${pair#*|}" <<<"$out"; then pass "inspect ${pair%%|*}: ${pair#*|}"; else fail "inspect ${pair%%|*}: $out"; fi
done

# Errors: each one line, exit code 2, every rank ended.
run_mpi 2 60 "${CLS[@]}" --model gpt
expect_usage_error "gpt for classification" "--model gpt: is a language model and does not fit --task classification"
run_mpi 2 60 "${CLS[@]}" --task lm --model gpt
expect_usage_error "lm on float data" "--train-data '" "holds float32 values; --task lm needs integer token ids"
run_mpi 2 60 "${LM[@]}" --context 40
expect_usage_error "context longer than the data" "--context 40:" "holds sequences of 33 tokens"
run_mpi 2 60 "${LM[@]}" --heads 3
expect_usage_error "heads not dividing the width" "--heads 3: must divide --hidden 64"
run_mpi 2 60 "${REG[@]}" --task classification
expect_usage_error "classification on regression targets" "must be a 1-D integer array of class labels"
run_mpi 2 60 "${LM[@]}" --vocab-size 10
expect_rank_failure "token id beyond --vocab-size" "outside [0, 10) set by --vocab-size 10"
finish
