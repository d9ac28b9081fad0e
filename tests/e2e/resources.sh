# No leaks over a long run: 1024 steps on 2 ranks with a checkpoint every 50 steps and an evaluation
# every 32; after every epoch each rank logs its open file descriptors, threads, communicators and
# HDF5 objects (--log-level debug). They must not grow after the first epoch. The same run's start-up
# breakdown: one line per rank, every phase in order, the phases adding up to the total.
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
# "start-up: T s from process start: libraries a s, MPI init b s, ..., first batch z s", once a rank.
phases="libraries,MPI init,config,checkpoint verify,device,shard scan,model build,gradient communicator,DDP broadcast,optimizer,checkpoint resume,first batch"
for rank in 0 1; do
  CASES=$((CASES + 1))
  lines=$(grep "\[rank $rank/2\].*start-up: " <<<"$ERR$OUT")
  verdict=$(python3 - "$phases" "$lines" 2>&1 <<'PY'
import re, sys
expected, lines = sys.argv[1].split(","), sys.argv[2].splitlines()
if len(lines) != 1:
    sys.exit(f"{len(lines)} start-up lines, expected 1")
total = float(re.search(r"start-up: ([0-9.]+) s from process start: ", lines[0]).group(1))
found = re.findall(r"(?:: |, )([A-Za-z][A-Za-z ]*?) ([0-9.]+) s", lines[0].split("from process start")[1])
names = [n for n, _ in found]
if names != expected:
    sys.exit(f"phases {names}, expected {expected}")
seconds = [float(v) for _, v in found]
if abs(sum(seconds) - total) > 0.005 * len(seconds) + 0.01:
    sys.exit(f"phases add up to {sum(seconds):.2f} s, the total is {total:.2f} s")
if seconds[0] <= 0.0:
    sys.exit("loading the libraries took no time: the process start was not read")
print(f"{total:.2f} s, libraries {seconds[0]:.2f} s")
PY
  )
  if [ $? = 0 ]; then pass "rank $rank start-up breakdown: $verdict"
  else fail "rank $rank start-up breakdown: $verdict"$'\n'"$lines"; fi
done
finish
