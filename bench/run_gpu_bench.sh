#!/usr/bin/env bash
# The GPU benchmark of scripts/device_check.sh: mnddp (1 rank, NCCL backend, bf16 autocast) against
# PyTorch eager from the device's python3 (bench/torch_gpu_peer.py), the same ConvNet, data, batch,
# optimizer and steps, alternating, 3 rounds. Prints samples/s and peak GPU memory of each round and
# a last line "ratio convnet: R (...)" (R = mnddp / PyTorch, medians; goal >= 1.0).
# Usage: MNDDP_BUILD_DIR=build MNDDP_PYTHON=python3 bench/run_gpu_bench.sh WORK_DIR [rounds] [steps]
set -euo pipefail
work=${1:?usage: $0 WORK_DIR [rounds] [steps]}
rounds=${2:-3}
steps=${3:-200}
build=${MNDDP_BUILD_DIR:?}
python=${MNDDP_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -d "$work/gpu-data" ] || "$build/mnddp-data" synth --out "$work/gpu-data" --train-samples 16384 --val-samples 0 \
  --shape 3,32,32 --classes 10 --shards 4 >/dev/null
model=(--model convnet --hidden 64 --layers 4 --batch-size 256)

ours=()
peer=()
for round in $(seq "$rounds"); do
  rm -f "$work/gpu.jsonl"
  mpiexec -np 1 "$build/mnddp" train --train-data "$work/gpu-data/train_*.h5" --val-data "" "${model[@]}" \
    --amp bf16 --backend nccl --device cuda --lr 0.05 --momentum 0.9 --max-steps $((steps + 20)) --log-interval 20 \
    --metrics-file "$work/gpu.jsonl" --threads 8 >"$work/gpu-mnddp.log" 2>&1
  rate=$("$python" -c "
import json
rows = [json.loads(l) for l in open('$work/gpu.jsonl') if '\"train\"' in l][1:]
print(sum(r['samples_per_s'] for r in rows) / len(rows))")
  mib=$(grep -o 'peak GPU memory: [0-9]*' "$work/gpu-mnddp.log" | awk '{print $4}')
  ours+=("$rate")
  line=$("$python" "$here/torch_gpu_peer.py" --data "$work/gpu-data" --steps "$steps" --warmup 20 --batch-size 256 \
    --hidden 64 --layers 4 --classes 10)
  peer+=("$(awk '{print $3}' <<<"$line")")
  echo "round $round: mnddp $rate samples/s (peak ${mib:-?} MiB), PyTorch eager $(awk '{print $3}' <<<"$line") samples/s (peak $(awk '{print $5}' <<<"$line") MiB)"
  peer_mib=$(awk '{print $5}' <<<"$line")
done
"$python" -c "
import statistics as s
o = [float(v) for v in '${ours[*]}'.split()]; p = [float(v) for v in '${peer[*]}'.split()]
print(f'ratio convnet: {s.median(o) / s.median(p):.2f} (mnddp {s.median(o):.0f} samples/s, {\"${mib:-?}\"} MiB; '
      f'PyTorch eager {s.median(p):.0f} samples/s, {\"${peer_mib:-?}\"} MiB; bf16, batch 256, {$steps} steps)')"
