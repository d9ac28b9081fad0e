#!/usr/bin/env bash
# Resume time of a ZeRO checkpoint on 1, 2 and 4 ranks: 4 ranks at --zero 2 write one (a large MLP
# with AdamW), then it is resumed with --resume PATH by 1 rank (--zero 0), 2 and 4 ranks (--zero 2),
# in turn, round by round. The figure is the run summary's start-up phases "checkpoint verify" (every
# rank hashes 1/N of every array) plus "checkpoint resume" (the reads: at --zero 2 each rank reads its
# pieces of the parameters and the optimizer state, then the parameters are all-gathered), of the
# slowest rank; the median of the rounds. Warm page cache (the file was just written).
# Usage: bench/zero_resume.sh [--rounds N] [--hidden H] [--layers L]   (defaults 3, 2048, 16)
set -euo pipefail
# shellcheck source=../scripts/common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
rounds=3 hidden=2048 layers=16
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    *) die "bench/zero_resume.sh: unknown option $1" ;;
  esac
done
export OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-zero-resume.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 512 --val-samples 64 --shards 4 --shape 256 \
  --classes 4 --seed 3 >/dev/null

# train NP ZERO STEPS [OPTIONS...]: one run whose summary lands in $work/metrics.jsonl.
train() {
  local np=$1 zero=$2 steps=$3
  shift 3
  rm -f "$work/metrics.jsonl"
  mpirun -np "$np" --oversubscribe "$MNDDP_BUILD_DIR/mnddp" train --train-data "$work/data/train_*.h5" --val-data "" \
    --num-classes 4 --model mlp --hidden "$hidden" --layers "$layers" --optimizer adamw --batch-size 8 \
    --max-steps "$steps" --epochs 1 --threads 1 --metrics-file "$work/metrics.jsonl" --progress lines \
    --checkpoint-async false --zero "$zero" "$@" >"$work/out" 2>&1 || die "mnddp failed: $(tail -5 "$work/out")"
}

train 4 2 2 --checkpoint-dir "$work/ck"
checkpoint="$work/ck/step-00000002.h5"
echo "# Resume time: MLP 256 -> ${hidden} x ${layers} -> 4, AdamW, written by 4 ranks at --zero 2" \
  "($(du -m "$checkpoint" | cut -f1) MiB), $rounds rounds"
echo "| ranks | --zero | total = verify + read (ms), round by round | median |"
echo "|---|---|---|---|"
declare -A times=()
for ((round = 0; round < rounds; round++)); do
  for np in 1 2 4; do
    zero=2
    [ "$np" = 1 ] && zero=0
    rm -rf "$work/resumed"
    train "$np" "$zero" 3 --checkpoint-dir "$work/resumed" --resume "$checkpoint" --keep-last 1
    ms=$("$MNDDP_VENV/bin/python" -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("kind") == "summary":
        p = m["startup_phases_s"]
        verify, read = 1000 * p["checkpoint verify"], 1000 * p["checkpoint resume"]
        print(f"{verify + read:.0f}={verify:.0f}+{read:.0f}")' "$work/metrics.jsonl")
    times[$np]+="$ms "
  done
done
for np in 1 2 4; do
  zero=2
  [ "$np" = 1 ] && zero=0
  median=$(tr ' ' '\n' <<<"${times[$np]}" | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  echo "| $np | $zero | ${times[$np]% } | $median |"
done
