# No leaks over a long run: 1024 steps on 2 ranks with a checkpoint every 50 steps and an evaluation
# every 32; after every epoch each rank logs its open file descriptors, threads, communicators and
# HDF5 objects (--log-level debug). They must not grow after the first epoch.
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 1024 --val-samples 64 --shards 2 --shape 16 >/dev/null
run_mpi 2 300 --train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --batch-size 16 --epochs 32 \
  --metrics-file "$WORK/metrics.jsonl" --checkpoint-dir "$WORK/ck" --checkpoint-interval 50 --keep-last 2 \
  --log-level debug --log-all-ranks true --log-interval 100

CASES=$((CASES + 1))
samples=$(grep -c 'resources:' <<<"$ERR$OUT")
if [ "$RC" = 0 ] && [ "$samples" = 64 ]; then pass "1024 steps, 20 checkpoints, 32 evaluations: $samples resource samples"
else fail "run: rc $RC, $samples resource samples (expected 64)"$'\n'"$(tail -5 <<<"$ERR")"; fi

for rank in 0 1; do
  CASES=$((CASES + 1))
  counts=$(grep "\[rank $rank/2\].*resources:" <<<"$ERR$OUT" | sed 's/.*resources: //' | sort | uniq -c)
  if [ "$(wc -l <<<"$counts")" = 1 ]; then pass "rank $rank holds the same after every epoch: $(sed 's/^ *//' <<<"$counts")"
  else fail "rank $rank: resources changed over the run:"$'\n'"$counts"; fi
done
finish
