# sbatch slurm/train.sbatch on the local cluster, 2 nodes x 2 tasks, the script unchanged except for
# command-line overrides (tasks per node, GPUs per node, CPUs per task, time, output): the job
# completes with 4 ranks, local ranks 0 and 1 on each of two nodes, each rank bound to its own core,
# one thread per rank from SLURM_CPUS_PER_TASK, and a final accuracy; the run directory is keyed
# by the job id; the output file has the plain interval lines (not a progress bar) and the summary. With 2 CPUs per task each rank gets 2 cores and 2 threads. A missing binary fails
# fast with a message.
source "$(dirname "$0")/lib.sh"
use_cluster
make_data

log=$WORK/train.out
submit job --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --time=5 --output="$log" \
  "$SLURM_DIR/train.sbatch" "${DATA[@]}" --batch-size 8 --epochs 2 --hidden 32 --log-interval 8
if ! wait_until 180 job_ended "$job"; then fail "job $job did not end within 180 s"; fi
expect_job "train.sbatch 2 nodes x 2 tasks" "$job" COMPLETED 0:0
expect_log "4 ranks on two nodes, local ranks 0 and 1 on each, one thread each" "$log" \
  'rank 0/4 host [^ ]+ node 0/2 local rank 0/2 .* threads 1$' \
  'rank 1/4 host [^ ]+ node 0/2 local rank 1/2 .* threads 1$' \
  'rank 2/4 host [^ ]+ node 1/2 local rank 0/2 .* threads 1$' \
  'rank 3/4 host [^ ]+ node 1/2 local rank 1/2 .* threads 1$'
# task/affinity's verbose binding report: Slurm's node names, and one core per local rank.
expect_log "srun placed tasks 0-1 on n1 and 2-3 on n2, each bound to its own core" "$log" \
  'cpu-bind=MASK - n1, task +0 +0 .*mask 0x1 set' 'cpu-bind=MASK - n1, task +1 +1 .*mask 0x2 set' \
  'cpu-bind=MASK - n2, task +2 +0 .*mask 0x1 set' 'cpu-bind=MASK - n2, task +3 +1 .*mask 0x2 set'
expect_log "the job header and the final accuracy" "$log" \
  "job $job \(mnddp\) restart 0: 2 nodes \(n\[1-2\]\), 4 tasks, 1 CPUs per task, GPUs per node 2" \
  '^final validation accuracy: (0\.9[0-9]*|1\.0+)$' 'finished$'
# A Slurm output file is not a terminal: the plain interval line (no progress bar, no escape
# codes), and the summary table at the end.
expect_log "interval lines and the run summary in the output file" "$log" \
  'epoch 1 step [0-9]+/[0-9]+: loss [0-9.]+ lr' '^run summary$' '^    exposed comm +[0-9.]+ ms' \
  "^  checkpoints +$WORK/runs/mnddp-$job/checkpoints/step-[0-9]+\.h5 \(the last\)"
CASES=$((CASES + 1))
if grep -q $'\033' "$log"; then fail "escape codes in the Slurm output file: $(grep -c $'\033' "$log") lines"
else pass "no escape codes in the Slurm output file"; fi
CASES=$((CASES + 1))
run_dir=$WORK/runs/mnddp-$job
if [ -s "$run_dir/checkpoints/latest" ] && [ -s "$run_dir/metrics.jsonl" ]; then
  pass "run directory keyed by the job id: $run_dir has checkpoints/$(cat "$run_dir/checkpoints/latest") and metrics.jsonl"
else
  fail "no checkpoints/latest and metrics.jsonl in $run_dir: $(ls -R "$WORK/runs" 2>&1)"
fi

# 2 CPUs per task: each rank is bound to both cores of its node (the script repeats --cpus-per-task
# on srun, which Slurm 22.05 does not inherit: it would bind to one) and runs 2 torch threads.
log=$WORK/cpus.out
submit job --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=2 --time=5 --output="$log" \
  "$SLURM_DIR/train.sbatch" "${DATA[@]}" --batch-size 8 --epochs 1 --hidden 32
wait_until 180 job_ended "$job" || fail "job $job did not end within 180 s"
expect_job "train.sbatch 2 nodes x 1 task x 2 CPUs" "$job" COMPLETED 0:0 &&
  expect_log "... each rank on both cores of its node, 2 threads" "$log" \
    'cpu-bind=MASK - n1, task +0 +0 .*mask 0x3 set' 'cpu-bind=MASK - n2, task +1 +0 .*mask 0x3 set' \
    'rank 0/2 host [^ ]+ node 0/2 local rank 0/1 .* threads 2$' 'rank 1/2 host [^ ]+ node 1/2 local rank 0/1 .* threads 2$'

# A wrong MNDDP_BIN: exit 2 with a message before any srun.
submit bad --nodes=1 --ntasks-per-node=1 --gpus-per-node=0 --cpus-per-task=1 --time=1 --output="$WORK/bad.out" \
  --export=ALL,MNDDP_BIN=/nonexistent/mnddp "$SLURM_DIR/train.sbatch"
wait_until 60 job_ended "$bad" || fail "job $bad did not end within 60 s"
expect_job "a missing binary fails the job" "$bad" FAILED 2:0 &&
  expect_log "... and says why" "$WORK/bad.out" 'error: no mnddp binary at /nonexistent/mnddp \(set MNDDP_BIN, or module load mnddp\)'
finish
