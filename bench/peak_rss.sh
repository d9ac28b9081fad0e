#!/usr/bin/env bash
# Runs one rank under GNU time and writes its peak resident set size (KiB) to
# $COMPARE_RSS_DIR/rank.R, R from Open MPI's or torchrun's environment. bench/compare.py wraps both
# sides' ranks in it, so mnddp and the peer are measured the same way.
set -euo pipefail
rank=${OMPI_COMM_WORLD_RANK:-${RANK:?neither OMPI_COMM_WORLD_RANK nor RANK is set}}
exec /usr/bin/time -f %M -o "${COMPARE_RSS_DIR:?}/rank.$rank" "$@"
