#!/usr/bin/env bash
# Quick start: install what is missing, build, make the demo dataset and train on 2 MPI ranks.
# Usage: scripts/run.sh [extra mnddp train options]   (MNDDP_RANKS=4 scripts/run.sh for 4 ranks)
set -euo pipefail
source "$(dirname "$0")/common.sh"

bash "$MNDDP_ROOT/scripts/setup.sh"
mnddp_build mnddp mnddp-data
mnddp_mpi_env
cd "$MNDDP_ROOT"
mkdir -p runs

if [ ! -f data/demo/val_000.h5 ]; then
  say "making the demo dataset in data/demo"
  "$MNDDP_BUILD_DIR/mnddp-data" synth --out data/demo --train-samples 16384 --val-samples 4096 --shards 4 \
    --shape 1,28,28 --classes 10 --noise 8 --seed 1234
fi

ranks="${MNDDP_RANKS:-2}"
extra=()
[ "$ranks" -gt "$(nproc)" ] && extra+=(--oversubscribe)
say "training: mpirun -np $ranks mnddp train --config configs/demo.ini $*"
mpirun -np "$ranks" "${extra[@]}" "$MNDDP_BUILD_DIR/mnddp" train --config configs/demo.ini --threads 1 "$@" \
  | tee runs/demo.log
accuracy=$(grep -o 'final validation accuracy: [0-9.]*' runs/demo.log | tail -1)
[ -n "$accuracy" ] || die "the run printed no final validation accuracy (see runs/demo.log)"
say "$accuracy"
