# Interop: a checkpoint is loaded into PyTorch two ways (h5py via data_tools/load_checkpoint.py, and
# torch.load of `mnddp export`), and Python's validation accuracy equals the one mnddp reported. The
# ResNets load into torchvision's own (strict: every name and shape), with either stem.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_PYTHON:?}" "${MNDDP_SOURCE_DIR:?}"
LOADER="$MNDDP_SOURCE_DIR/data_tools/load_checkpoint.py"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 2000 --val-samples 500 --shards 2 --shape 1,12,12 \
  --noise 2 >/dev/null
for entry in mlp convnet resnet18:cifar resnet34:imagenet; do
  model=${entry%%:*}
  stem=${entry#*:}
  [ "$stem" = "$entry" ] && stem=auto
  run_mpi 2 300 --train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --model "$model" --hidden 16 \
    --layers 2 --epochs 1 --batch-size 32 --stem "$stem" --checkpoint-dir "$WORK/$model" --metrics-file ""
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
finish
