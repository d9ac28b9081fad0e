#!/usr/bin/env bash
# mnddp vs PyTorch DDP (torchrun) on the same HDF5 shards, model, batch and optimizer, alternating,
# 2 ranks. Reports training samples/s of each (after warm-up) and the ratio.
# Usage: bench/run_peer_bench.sh [rounds] [steps]
set -euo pipefail
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
rounds="${1:-3}"
steps="${2:-300}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 32768 --val-samples 64 --shards 4 \
  --shape 1,28,28 --classes 10 --noise 8 >/dev/null
export OMP_NUM_THREADS=1

ours=()
peer=()
for round in $(seq "$rounds"); do
  rm -f "$work/m.jsonl"
  # log-interval 20 with warm-up excluded: the mean of the recorded intervals after the first.
  mpirun -np 2 --oversubscribe "$MNDDP_BUILD_DIR/mnddp" train --train-data "$work/data/train_*.h5" --val-data "" \
    --model mlp --hidden 256 --layers 2 --batch-size 64 --lr 0.05 --momentum 0.9 --threads 1 \
    --max-steps $((steps + 20)) --log-interval 20 --metrics-file "$work/m.jsonl" >/dev/null
  ours+=("$("$MNDDP_VENV/bin/python" -c "
import json,sys
rows=[json.loads(l) for l in open('$work/m.jsonl') if '\"train\"' in l][1:]
print(sum(r['samples_per_s'] for r in rows)/len(rows))")")
  peer+=("$("$MNDDP_VENV/bin/torchrun" --standalone --nproc_per_node 2 "$MNDDP_ROOT/bench/torch_ddp_peer.py" \
    --data "$work/data" --steps "$steps" --warmup 20 --batch-size 64 2>/dev/null | awk '/peer samples/ {print $3}')")
  echo "round $round: mnddp ${ours[-1]} samples/s, PyTorch DDP ${peer[-1]} samples/s"
done
"$MNDDP_VENV/bin/python" -c "
import statistics as s
o=[float(v) for v in '${ours[*]}'.split()]; p=[float(v) for v in '${peer[*]}'.split()]
print(f'median: mnddp {s.median(o):.0f} samples/s, PyTorch DDP {s.median(p):.0f} samples/s, ratio {s.median(o)/s.median(p):.2f}')"
