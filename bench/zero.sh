#!/usr/bin/env bash
# ZeRO's memory and speed against --zero 0: a large MLP with AdamW on 1, 2 and 4 ranks at --zero 0, 1
# and 2. For each: the optimizer-state bytes per rank that mnddp logs at start-up, and every rank's
# peak resident set size (GNU time, bench/peak_rss.sh); then step time on 2 ranks, the three stages
# alternating round by round, as the ratio to --zero 0 of the same round (median of the rounds).
# Usage: bench/zero.sh [--rounds N] [--hidden H] [--layers L]   (defaults 5, 2048, 6; --rounds 0: memory only)
set -euo pipefail
# shellcheck source=../scripts/common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/common.sh"
mnddp_mpi_env
rounds=5 hidden=2048 layers=6
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    *) die "bench/zero.sh: unknown option $1" ;;
  esac
done
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time, Debian package 'time') measures peak RSS: install it"
export OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-zero-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$MNDDP_BUILD_DIR/mnddp-data" synth --out "$work/data" --train-samples 4096 --val-samples 64 --shards 4 --shape 256 \
  --classes 4 --seed 3 >/dev/null

# run NP ZERO STEPS: one run; prints "state_mib max_rss_mib mean_rss_mib step_ms".
run() {
  local np=$1 zero=$2 steps=$3
  rm -rf "$work/rss" && mkdir -p "$work/rss"
  COMPARE_RSS_DIR="$work/rss" mpirun -np "$np" --oversubscribe "$MNDDP_ROOT/bench/peak_rss.sh" \
    "$MNDDP_BUILD_DIR/mnddp" train --train-data "$work/data/train_*.h5" --val-data "" --num-classes 4 \
    --model mlp --hidden "$hidden" --layers "$layers" --optimizer adamw --batch-size 32 --max-steps "$steps" \
    --epochs 1 --threads 1 --metrics-file "" --checkpoint-dir "" --progress lines --zero "$zero" >"$work/out" 2>&1 ||
    die "mnddp failed: $(tail -5 "$work/out")"
  local state step
  # --zero 0 logs no such line: its state is the whole model's, 2 copies (AdamW) of every parameter.
  state=$(grep -o 'optimizer state [0-9.]* MiB on this rank' "$work/out" | head -1 | awk '{print $3}' || true)
  [ -n "$state" ] || state=$(awk -v h="$hidden" -v l="$layers" 'BEGIN{p = 256*h + h + (l-1)*(h*h + h) + h*4 + 4; printf "%.2f", 2*4*p/1048576}')
  step=$(grep -o 'step time *[0-9.]* ms per step' "$work/out" | awk '{print $3}')
  cat "$work"/rss/rank.* | awk -v s="$state" -v t="$step" \
    '{m = $1 > m ? $1 : m; sum += $1; n++} END {printf "%s %.0f %.0f %s\n", s, m/1024, sum/n/1024, t}'
}

echo "# ZeRO memory: MLP 256 -> ${hidden} x ${layers} -> 4, AdamW, batch 32 per rank, 5 steps"
echo "| ranks | --zero | optimizer state per rank (MiB) | peak RSS, largest rank (MiB) | peak RSS, mean of ranks (MiB) |"
echo "|---|---|---|---|---|"
for np in 1 2 4; do
  for zero in 0 1 2; do
    read -r state max mean _ < <(run "$np" "$zero" 5)
    echo "| $np | $zero | $state | $max | $mean |"
  done
done

[ "$rounds" -gt 0 ] || exit 0  # --rounds 0: the memory table only
echo
echo "# ZeRO step time on 2 ranks, against --zero 0 of the same round ($rounds rounds, 30 steps each)"
ratios1=() ratios2=() base=()
for ((round = 0; round < rounds; round++)); do
  read -r _ _ _ t0 < <(run 2 0 30)
  read -r _ _ _ t1 < <(run 2 1 30)
  read -r _ _ _ t2 < <(run 2 2 30)
  base+=("$t0")
  ratios1+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN{printf "%.3f", a/b}')")
  ratios2+=("$(awk -v a="$t2" -v b="$t0" 'BEGIN{printf "%.3f", a/b}')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "| --zero | step time / --zero 0's (median; min-max) |"
echo "|---|---|"
echo "| 0 | 1 ($(median "${base[@]}") ms per step) |"
echo "| 1 | $(median "${ratios1[@]}") ($(printf '%s\n' "${ratios1[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)) |"
echo "| 2 | $(median "${ratios2[@]}") ($(printf '%s\n' "${ratios2[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)) |"
