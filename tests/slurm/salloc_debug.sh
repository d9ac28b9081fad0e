# Interactive use: slurm/debug_salloc.sh on the local cluster, 2 nodes x 2 tasks.
# 1. Run from outside an allocation: salloc + srun -l, a short run whose lines carry rank labels.
# 2. `salloc --no-shell`, then the script inside that allocation (SLURM_JOB_ID) — and, while a step
#    holds all the allocation's CPUs, attaching with `srun --overlap --jobid` runs at once, where a
#    plain `srun --jobid` waits.
source "$(dirname "$0")/lib.sh"
use_cluster
make_data
export DEBUG_NODES=2 DEBUG_TASKS_PER_NODE=2 DEBUG_GPUS_PER_NODE=2 DEBUG_CPUS_PER_TASK=1 DEBUG_TIME=5 DEBUG_STEPS=12
ARGS=("${DATA[@]}" --batch-size 8 --hidden 32)

# labelled_ranks_ok FILE: lines from all 4 ranks, each labelled by srun with its task id, and the run's end.
labelled_ranks_ok() {
  local name=$1 file=$2
  expect_log "$name" "$file" '^0: .*\[rank 0/4\] .*step 12/12' '^1: .*\[rank 1/4\] .*step 12/12' \
    '^2: .*\[rank 2/4\] .*step 12/12' '^3: .*\[rank 3/4\] .*step 12/12' \
    '^0: .*rank 2/4 host [^ ]+ node 1/2 local rank 0/2' '^0: final validation accuracy: '
}

# 1. From outside: the script asks for the allocation itself.
timeout 120 bash "$SLURM_DIR/debug_salloc.sh" "${ARGS[@]}" >"$WORK/salloc.out" 2>&1
rc=$?
CASES=$((CASES + 1))
id=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$WORK/salloc.out")
[ -z "$id" ] || JOBS+=("$id")
if [ "$rc" = 0 ] && [ -n "$id" ] && grep -q "Relinquishing job allocation $id" "$WORK/salloc.out"; then
  pass "debug_salloc.sh: salloc granted job $id, ran, exit 0, released the allocation"
else
  fail "debug_salloc.sh: rc $rc"$'\n'"$(tail -20 "$WORK/salloc.out")"
fi
labelled_ranks_ok "... srun -l labelled the lines of all 4 ranks (every rank logs)" "$WORK/salloc.out"

# 2. An allocation without a shell, used by id.
salloc --no-shell --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --time=5 \
  --job-name=mnddp-alloc >"$WORK/alloc.out" 2>&1
id=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$WORK/alloc.out")
if [ -z "$id" ]; then
  fail "salloc --no-shell: $(cat "$WORK/alloc.out")"
  finish
  exit
fi
JOBS+=("$id")
SLURM_JOB_ID=$id timeout 120 bash "$SLURM_DIR/debug_salloc.sh" "${ARGS[@]}" >"$WORK/inside.out" 2>&1
rc=$?
CASES=$((CASES + 1))
if [ "$rc" = 0 ]; then pass "SLURM_JOB_ID=$id debug_salloc.sh ran inside the allocation"; else fail "inside: rc $rc"; fi
labelled_ranks_ok "... on all 4 ranks" "$WORK/inside.out"

# A step that takes every CPU of the allocation, like a training that hangs.
SLURM_JOB_ID=$id srun --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 sleep 120 >/dev/null 2>&1 &
busy=$!
steps_running() { [ "$(squeue -h -s -j "$id" -o %i | grep -c "^$id\.[0-9]")" -ge 1 ]; }
wait_until 30 steps_running || fail "the busy step did not start"
timeout 6 srun --jobid="$id" --nodes=1 --ntasks=1 --nodelist=n2 true >"$WORK/plain.out" 2>&1
plain=$?
start=$SECONDS
timeout 30 srun --overlap --jobid="$id" --nodes=1 --ntasks=1 --nodelist=n2 bash -c 'echo "on $SLURMD_NODENAME"' \
  >"$WORK/overlap.out" 2>&1
overlap=$?
CASES=$((CASES + 1))
if [ "$plain" = 124 ] && [ "$overlap" = 0 ] && grep -qx "on n2" "$WORK/overlap.out"; then
  pass "attach: plain srun --jobid waits for the busy CPUs; srun --overlap --jobid ran on n2 in $((SECONDS - start)) s"
else
  fail "attach: plain srun rc $plain (expected 124: $(cat "$WORK/plain.out")), --overlap rc $overlap: $(cat "$WORK/overlap.out")"
fi
scancel "$id"
wait "$busy" 2>/dev/null
wait_until 30 job_ended "$id" || fail "allocation $id did not end after scancel"
finish
