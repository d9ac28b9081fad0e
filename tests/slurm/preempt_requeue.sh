# Preemption under Slurm with slurm/train_requeue.sbatch, 2 nodes x 2 tasks:
# 1. `scancel --batch --signal=USR2` mid-training: the batch shell forwards it, all 4 ranks
#    checkpoint at one step and exit 3, the script requeues the job, the requeued job (restart 1,
#    same run directory) resumes from that step and completes; its final parameters, optimizer state
#    and RNG, and its loss log, are bitwise those of an uninterrupted run.
# 2. A plain `scancel` (SIGTERM to the shell and the ranks): checkpoint, exit 3, no requeue.
# 3. SIGUSR2 as soon as the job starts, before mnddp can catch it: it must not kill the ranks (the
#    script holds it back for 10 s); the job checkpoints, requeues and completes.
source "$(dirname "$0")/lib.sh"
use_cluster
make_data
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")
# 512 samples / (4 ranks x 8) = 16 steps per epoch, 320 in all; dropout checks the RNG state too.
TRAIN=("${DATA[@]}" --batch-size 8 --epochs 20 --hidden 32 --dropout 0.1 --optimizer sgd --lr 0.05
  --log-interval 10)
# Slurm's own warning (the script's --signal=B:USR2@600) would come at once with a 10-minute limit.
REQUEUE_JOB=(--nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --time=10 --signal=B:USR2@30)

# The uninterrupted reference, under mpirun (same ranks, same batch, same summation order).
run_mpi 4 120 "${TRAIN[@]}" --checkpoint-dir "$WORK/straight" --metrics-file "$WORK/straight.jsonl"
[ "$RC" = 0 ] || { fail "the reference run failed (rc $RC): $ERR"; finish; exit; }

# 1. USR2 to the batch shell -> checkpoint -> requeue -> resume -> done.
log=$WORK/requeue.out
# The signal comes after step 40, when mnddp catches it: no need to hold it back for 10 s.
submit job "${REQUEUE_JOB[@]}" --output="$log" --export=ALL,MNDDP_WARNING_GRACE=0 \
  "$SLURM_DIR/train_requeue.sbatch" "${TRAIN[@]}"
wait_until 120 log_has "$log" 'step 40/' || fail "job $job: no step 40 within 120 s"
scancel --batch --signal=USR2 "$job"
if wait_until 60 job_requeued "$job"; then
  CASES=$((CASES + 1))
  pass "requeued: job $job pending again ($(job_field "$job" Reason), restart $(job_field "$job" Restarts))"
  release "$job"
else
  fail "job $job was not requeued within 60 s"
fi
wait_until 180 job_ended "$job" || fail "job $job did not end within 180 s of its release"
expect_job "the requeued job completes" "$job" COMPLETED 0:0 1
step=$(sed -n 's/.*preemption signal 12: checkpointed at step \([0-9]*\);.*/\1/p' "$log" | sort -u)
CASES=$((CASES + 1))
if [ "$(grep -c 'preemption signal 12: checkpointed at step' "$log")" = 4 ] && [[ "$step" =~ ^[0-9]+$ ]]; then
  pass "all 4 ranks checkpointed at step $step and exited with code 3"
else
  fail "ranks did not agree on one preemption step: '$step'"$'\n'"$(grep 'preemption signal' "$log")"
fi
padded=$(printf '%08d' "${step:-0}")
expect_log "forwarded, requeued by the script, resumed from step $step, finished" "$log" \
  'received SIGUSR2' 'passing SIGUSR2 to the job step$' 'srun: error: n2: tasks? [-0-9]+: Exited with exit code 3' \
  "checkpointed \(exit 3\) after SIGUSR2: requeueing job $job as restart 1" "job $job \(mnddp\) restart 1 \(SLURM_RESTART_COUNT\)" \
  "resumed from '.*/mnddp-$job/checkpoints/step-$padded.h5'" 'finished after 1 restart\(s\)$'
run_dir=$WORK/runs/mnddp-$job
CASES=$((CASES + 1))
if "${COMPARE[@]}" "$run_dir/checkpoints/$(cat "$run_dir/checkpoints/latest")" \
  "$WORK/straight/$(cat "$WORK/straight/latest")" --metrics "$run_dir/metrics.jsonl" "$WORK/straight.jsonl" \
  >"$WORK/compare.out" 2>&1; then
  pass "preempted + requeued + resumed ends bitwise identical to the uninterrupted run: $(tail -1 "$WORK/compare.out")"
else
  fail "the resumed run differs from the uninterrupted one: $(cat "$WORK/compare.out")"
fi

# 2. scancel (SIGTERM): the ranks checkpoint, the script does not requeue, the job stays cancelled.
log=$WORK/cancel.out
submit job "${REQUEUE_JOB[@]}" --output="$log" "$SLURM_DIR/train_requeue.sbatch" "${TRAIN[@]}"
wait_until 120 log_has "$log" 'step 20/' || fail "job $job: no step 20 within 120 s"
scancel "$job"
wait_until 60 job_ended "$job" || fail "cancelled job $job did not end within 60 s"
expect_job "scancel ends the job" "$job" CANCELLED 3:0 0
expect_log "... after a checkpoint, without a requeue" "$log" 'received SIGTERM' \
  'preemption signal 15: checkpointed at step' 'checkpointed \(exit 3\) without SIGUSR2 to this shell: not requeueing'
sleep 2
CASES=$((CASES + 1))
if [ "$(job_field "$job" JobState)" = CANCELLED ] && [ -s "$WORK/runs/mnddp-$job/checkpoints/latest" ]; then
  pass "... and stays cancelled, with checkpoint $(cat "$WORK/runs/mnddp-$job/checkpoints/latest") to resume from"
else
  fail "cancelled job: state $(job_field "$job" JobState), checkpoints: $(ls "$WORK/runs/mnddp-$job/checkpoints" 2>&1)"
fi

# 3. A warning during start-up: held back for the script's default 10 s, then acted on.
log=$WORK/early.out
submit job "${REQUEUE_JOB[@]}" --output="$log" "$SLURM_DIR/train_requeue.sbatch" "${TRAIN[@]}"
wait_until 60 job_running "$job" || fail "job $job did not start within 60 s"
# Once the batch shell runs (its first line is logged after its trap): Slurm reports a job RUNNING
# before slurmd has started the shell, and a signal for a batch step not yet there is lost (then the
# job trains to its end unwarned, COMPLETED with no restart: seen once).
wait_until 60 log_has "$log" 'restart 0 \(SLURM_RESTART_COUNT\)' || fail "job $job: no batch shell within 60 s"
scancel --batch --signal=USR2 "$job"
if wait_until 90 job_requeued_or_ended "$job" && job_requeued "$job"; then release "$job"; fi
wait_until 120 job_ended "$job" || fail "job $job did not end within 120 s"
CASES=$((CASES + 1))
got="$(job_field "$job" JobState) $(job_field "$job" ExitCode)"
if [ "$got" = "COMPLETED 0:0" ] && [ "$(job_field "$job" Restarts)" = 1 ] && ! grep -q 'User defined signal 2' "$log"; then
  pass "an early SIGUSR2 did not kill the ranks: $(grep -o 'passing SIGUSR2.*' "$log" | head -1), checkpoint, requeue, job $got"
else
  fail "early SIGUSR2: job $got"$'\n'"$(grep -v 'step [0-9]*/' "$log" | tail -20)"
fi
finish
