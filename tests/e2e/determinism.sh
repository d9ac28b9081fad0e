# --deterministic: two identical 2-rank runs of every model give bitwise-identical loss logs (train
# and validation), and so does a run with another --prefetch-batches or --threads (MKL's strict
# reproducibility, oneDNN off, and the zoo's thread-invariant BatchNorm2d and LayerNorm:
# docs/MODELS.md, Determinism). resnet18 on 8x8 images reaches 1x1 feature maps, the BatchNorm case.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"

"$MNDDP_DATA_BIN" synth --out "$WORK/img" --train-samples 256 --val-samples 64 --shards 2 --shape 3,8,8 --classes 4 \
  >/dev/null
"$MNDDP_DATA_BIN" synth --task regression --targets 2 --shape 1,4,4,4 --out "$WORK/vol" --train-samples 256 \
  --val-samples 64 --shards 2 >/dev/null
"$MNDDP_DATA_BIN" synth --task lm --vocab 32 --shape 17 --out "$WORK/lm" --train-samples 256 --val-samples 64 \
  --shards 2 >/dev/null
"$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/examples/torchscript/make_model.py" --shape 3,8,8 --classes 4 --out "$WORK/net.pt" \
  >/dev/null
IMG=(--train-data "$WORK/img/train_*.h5" --val-data "$WORK/img/val_*.h5" --num-classes 4)
COMMON=(--deterministic --max-steps 8 --batch-size 8 --log-interval 1 --optimizer adamw --lr 0.003 --dropout 0.1)

# losses_of ARGS...: runs ARGS on 2 ranks and prints every loss of its metrics file.
losses_of() {
  rm -f "$WORK/m.jsonl"
  run_mpi 2 300 "${COMMON[@]}" "$@" --metrics-file "$WORK/m.jsonl"
  [ "$RC" = 0 ] || { echo "failed (rc $RC): $(tail -3 <<<"$ERR")"; return; }
  grep -o '"loss":[-0-9.e+]*' "$WORK/m.jsonl" | cut -d: -f2 | tr '\n' ' '
}

# same NAME A B: the two loss logs are identical and not empty.
same() {
  CASES=$((CASES + 1))
  if [ -n "$2" ] && [[ $2 != failed* ]] && [ "$2" = "$3" ]; then pass "$1"; else fail "$1: '$2' vs '$3'"; fi
}

declare -A MODEL=(
  [mlp]="--model mlp ${IMG[*]}"
  [convnet]="--model convnet --hidden 8 ${IMG[*]}"
  [resnet18]="--model resnet18 ${IMG[*]}"
  [resnet18-syncbn]="--model resnet18 --sync-batchnorm ${IMG[*]}"
  [vit]="--model vit --hidden 16 --heads 2 --patch-size 4 ${IMG[*]}"
  [cnn3d]="--task regression --model cnn3d --hidden 4 --train-data $WORK/vol/train_*.h5 --val-data $WORK/vol/val_*.h5"
  [gpt]="--task lm --model gpt --hidden 32 --heads 2 --train-data $WORK/lm/train_*.h5 --val-data $WORK/lm/val_*.h5"
  [torchscript]="--model torchscript:$WORK/net.pt ${IMG[*]}"
)
for name in mlp convnet resnet18 resnet18-syncbn vit cnn3d gpt torchscript; do
  read -r -a args <<<"${MODEL[$name]}"
  first=$(losses_of "${args[@]}" --threads 1 --prefetch-batches 2)
  again=$(losses_of "${args[@]}" --threads 1 --prefetch-batches 2)
  same "$name: two identical runs, identical loss logs" "$first" "$again"
  prefetch=$(losses_of "${args[@]}" --threads 1 --prefetch-batches 5)
  same "$name: --prefetch-batches 5 gives the loss log of 2" "$first" "$prefetch"
  threads=$(losses_of "${args[@]}" --threads 3 --prefetch-batches 2)
  same "$name: --threads 3 gives the loss log of 1" "$first" "$threads"
done
finish
