# The runtime: one line per rank at start-up, and refusing a launch whose MPI world disagrees with
# Slurm's task count (srun without working PMI starts N singletons).
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/d" --train-samples 128 --val-samples 32 --shards 2 --shape 8 >/dev/null
DATA=(--train-data "$WORK/d/train_*.h5" --val-data "$WORK/d/val_*.h5" --metrics-file "" --max-steps 2 --batch-size 8)

run_mpi 3 60 "${DATA[@]}"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(grep -c 'rank [0-2]/3 host .* local rank [0-2]/3 device cpu backend mpi threads 1' <<<"$OUT")" = 3 ]; then
  pass "one start-up line per rank"
else
  fail "start-up lines (rc $RC):"$'\n'"$OUT"$'\n'"$ERR"
fi

# Each of 2 singletons believes it is alone while Slurm says 4 tasks.
for i in 0 1; do
  SLURM_NTASKS=4 SLURM_STEP_ID=0 SLURM_PROCID=$i timeout $((10 * ${MNDDP_TEST_TIME_SCALE:-1})) "$MNDDP_BIN" train "${DATA[@]}" >/dev/null 2>"$WORK/pmi$i" &
done
wait
RC=0
for i in 0 1; do grep -q "SLURM_NTASKS=4 but MPI sees a world of 1" "$WORK/pmi$i" || RC=1; done
CASES=$((CASES + 1))
if [ "$RC" = 0 ]; then pass "broken PMI is refused"; else fail "broken PMI: $(cat "$WORK"/pmi*)"; fi

SLURM_NTASKS=3 SLURM_STEP_ID=0 SLURM_PROCID=0 run_mpi 2 10 "${DATA[@]}"
expect_usage_error "SLURM_NTASKS disagrees with the world" "SLURM_NTASKS=3" "world of 2"

# A task count that is no number cannot be checked: say so, once, and go on.
SLURM_NTASKS=abc SLURM_STEP_ID=0 SLURM_PROCID=0 run_mpi 2 30 "${DATA[@]}"
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(grep -c "SLURM_NTASKS='abc' is not a number" <<<"$OUT")" = 1 ]; then
  pass "SLURM_NTASKS=abc: one warning, the run goes on"
else
  fail "SLURM_NTASKS=abc: rc $RC"$'\n'"$OUT"$'\n'"$ERR"
fi

finish
