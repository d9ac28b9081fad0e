# Interop: a checkpoint is loaded into PyTorch two ways (h5py via data_tools/load_checkpoint.py, and
# torch.load of `mnddp export`), and Python's validation accuracy equals the one mnddp reported. The
# ResNets and the ViT load into torchvision's own (strict: every name and shape), with either stem;
# gpt into a nanoGPT-layout module, cnn3d into its CosmoFlow-layout module, a TorchScript model into
# its own scripted file. Classification compares the accuracy exactly; regression and lm compare the
# validation loss (to 1e-5 relative: float32 sums in another order).
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"
LOADER="$MNDDP_SOURCE_DIR/data_tools/load_checkpoint.py"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 2000 --val-samples 500 --shards 2 --shape 1,12,12 \
  --noise 2 >/dev/null
for entry in mlp convnet resnet18:cifar resnet34:imagenet vit; do
  model=${entry%%:*}
  stem=${entry#*:}
  [ "$stem" = "$entry" ] && stem=auto
  run_mpi 2 300 --train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --model "$model" --hidden 16 \
    --layers 2 --epochs 1 --batch-size 32 --stem "$stem" --checkpoint-dir "$WORK/$model" --metrics-file "" \
    --heads 4 --patch-size 4
  reported=$(grep -o 'final validation accuracy: [0-9.]*' <<<"$OUT" | awk '{print $4}')
  checkpoint="$WORK/$model/$(cat "$WORK/$model/latest" 2>/dev/null)"
  from_h5=$("$MNDDP_PYTHON" "$LOADER" "$checkpoint" --data "$WORK/data/val_*.h5" | awk '/accuracy/ {print $2}')
  "$MNDDP_BIN" export --checkpoint "$checkpoint" --out "$WORK/$model.pt" >/dev/null
  from_pt=$("$MNDDP_PYTHON" "$LOADER" "$WORK/$model.pt" --data "$WORK/data/val_*.h5" | awk '/accuracy/ {print $2}')
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$reported" ] && [ "$reported" = "$from_h5" ] && [ "$reported" = "$from_pt" ]; then
    pass "$model: mnddp $reported = PyTorch via h5py $from_h5 = PyTorch via torch.load $from_pt"
  else
    fail "$model: mnddp '$reported', h5py '$from_h5', torch.load '$from_pt' (rc $RC) $ERR"
  fi
done

# loss_matches NAME ARGS...: train ARGS on 2 ranks, then the validation loss PyTorch computes from the
# export (on the shards VAL) equals the one in mnddp's metrics file.
loss_matches() {
  local name=$1
  shift
  run_mpi 2 300 "$@" --checkpoint-dir "$WORK/$name" --metrics-file "$WORK/$name.jsonl"
  local reported from_pt
  reported=$(grep '"kind":"eval"' "$WORK/$name.jsonl" | tail -1 | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2)
  "$MNDDP_BIN" export --checkpoint "$WORK/$name/$(cat "$WORK/$name/latest" 2>/dev/null)" --out "$WORK/$name.pt" >/dev/null
  from_pt=$("$MNDDP_PYTHON" "$LOADER" "$WORK/$name.pt" --data "$VAL" 2>&1 | awk '/^loss/ {print $2}')
  CASES=$((CASES + 1))
  if [ "$RC" = 0 ] && [ -n "$reported" ] && [ -n "$from_pt" ] &&
    awk -v a="$reported" -v b="$from_pt" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d <= 1e-5 * a)}'; then
    pass "$name: validation loss mnddp $reported = PyTorch via torch.load $from_pt"
  else
    fail "$name: mnddp loss '$reported', PyTorch '$from_pt' (rc $RC) $ERR"
  fi
}

"$MNDDP_DATA_BIN" synth --task lm --vocab 48 --shape 17 --out "$WORK/lm" --train-samples 512 --val-samples 128 \
  --shards 2 >/dev/null
VAL="$WORK/lm/val_*.h5"
loss_matches gpt --task lm --model gpt --hidden 32 --layers 2 --heads 4 --train-data "$WORK/lm/train_*.h5" \
  --val-data "$VAL" --optimizer adamw --lr 0.003 --max-steps 12
loss_matches gpt-untied --task lm --model gpt --hidden 32 --layers 1 --heads 2 --tie-embeddings false \
  --train-data "$WORK/lm/train_*.h5" --val-data "$VAL" --optimizer adamw --lr 0.003 --max-steps 8 --context 12
"$MNDDP_DATA_BIN" synth --task regression --targets 4 --shape 2,8,8,8 --out "$WORK/vol" --train-samples 256 \
  --val-samples 64 --shards 2 >/dev/null
VAL="$WORK/vol/val_*.h5"
loss_matches cnn3d --task regression --model cnn3d --hidden 4 --layers 2 --train-data "$WORK/vol/train_*.h5" \
  --val-data "$VAL" --optimizer adamw --lr 0.001 --max-steps 8 --batch-size 16
"$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/examples/torchscript/make_model.py" --shape 1,12,12 --classes 10 \
  --out "$WORK/net.pt" >/dev/null
VAL="$WORK/data/val_*.h5"
loss_matches torchscript --model "torchscript:$WORK/net.pt" --train-data "$WORK/data/train_*.h5" --val-data "$VAL" \
  --optimizer adamw --lr 0.003 --max-steps 12
finish
