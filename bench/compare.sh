#!/usr/bin/env bash
# The paired benchmark suite of mnddp against PyTorch DDP (torchrun + DDP, gloo on CPU, NCCL on GPU):
# the same models on the same HDF5 files, 1 and 2 ranks, alternating, median of the rounds; writes
# the tables into docs/BENCHMARKS.md and the plot docs/compare.png. The work is done by
# bench/compare.py (the report: bench/compare_report.py, whose method text the doc shows); the peer
# is bench/torch_peer.py.
# Usage: bench/compare.sh [--rounds N] [--models list] [--ranks "1 2"] [--quick] [--no-doc] [--help]
# Smoke check (about a minute): bench/compare.sh --quick --models mlp-small --rounds 1 --no-doc
set -euo pipefail
# shellcheck source=../scripts/common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
for program in mnddp mnddp-data; do
  [ -x "$MNDDP_BUILD_DIR/$program" ] || die "$MNDDP_BUILD_DIR/$program is missing: build first, or set MNDDP_BUILD_DIR"
done
[ -x "$MNDDP_VENV/bin/torchrun" ] || die "no torchrun in $MNDDP_VENV: run scripts/setup.sh"
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time, Debian package 'time') measures peak RSS: install it"
# One thread per rank on both sides, whatever the libraries would pick.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export MNDDP_ROOT MNDDP_BUILD_DIR MNDDP_VENV
exec "$MNDDP_VENV/bin/python" "$MNDDP_ROOT/bench/compare.py" "$@"
