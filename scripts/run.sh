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
# The demo's settings as defaults your options override (mnddp refuses an option given twice).
export MNDDP_CONFIG=${MNDDP_CONFIG:-configs/demo.ini} MNDDP_THREADS=${MNDDP_THREADS:-1}
say "training: mpirun -np $ranks mnddp train $* (MNDDP_CONFIG=$MNDDP_CONFIG, MNDDP_THREADS=$MNDDP_THREADS)"
mpirun -np "$ranks" "${extra[@]}" "$MNDDP_BUILD_DIR/mnddp" train "$@" | tee runs/demo.log
accuracy=$(grep -o 'final validation accuracy: [0-9.]*' runs/demo.log | tail -1)
[ -n "$accuracy" ] || die "the run printed no final validation accuracy (see runs/demo.log)"
say "$accuracy"
