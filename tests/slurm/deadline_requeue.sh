# A deadline that needs no signal (docs/SLURM.md): slurm/train_requeue.sbatch without its --signal
# line, under a short --time on 2 nodes x 1 task. mnddp reads the job's end from Slurm (--deadline
# auto, the default), checkpoints in time on both ranks and exits with code 3 and stop-reason
# "deadline"; the script requeues the job, and the successor resumes and ends bitwise identical to
# an uninterrupted run of the same steps.
#
# Rank 1 sleeps 0.5 s a step in the first segment (--inject-fault slow, from the config file), so the
# run is far from done when its 60 s end nears; the second segment, with the fault gone, runs 10
# steps (steps-per-run) and completes.
source "$(dirname "$0")/lib.sh"
use_cluster
make_data
LIMIT=60

sed '/^#SBATCH --signal/d' "$SLURM_DIR/train_requeue.sbatch" >"$WORK/requeue_no_signal.sbatch"
CASES=$((CASES + 1))
if grep -q -- "--signal" <(grep '^#SBATCH' "$WORK/requeue_no_signal.sbatch"); then
  fail "the copy still asks for a signal"
else
  pass "train_requeue.sbatch without its #SBATCH --signal line"
fi

# The checkpoint directory is given on the command line, which wins over the script's
# MNDDP_CHECKPOINT_DIR: the script must find stop-reason where mnddp resolved it (looking in the
# environment's directory, it would not requeue).
export MNDDP_CONFIG=$WORK/run.ini
ckpt=$WORK/on-command-line
printf 'inject-fault = slow@1:1\ndeadline-margin = 5\n' >"$MNDDP_CONFIG"
ARGS=("${DATA[@]}" --batch-size 8 --epochs 100000 --hidden 32 --log-interval 10)
log=$WORK/deadline.out
submit job --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=1 --time=$((LIMIT / 60)) \
  --output="$log" "$WORK/requeue_no_signal.sbatch" "${ARGS[@]}" --checkpoint-dir "$ckpt"
if ! wait_until $((LIMIT + 40)) job_requeued "$job"; then
  fail "job $job was not requeued (state $(job_field "$job" JobState))"$'\n'"$(tail -20 "$log")"
  finish
  exit
fi
step=$(sed -n "s/.*the job's end is near (--deadline): checkpointed at step \([0-9]*\);.*/\1/p" "$log" | sort -u)
[[ "$step" =~ ^[0-9]+$ ]] || step=0
expect_log "no signal came; Slurm's end time was read; both ranks checkpointed at step $step in time" "$log" \
  "the job ends in [0-9]+ s \((squeue|scontrol)\): the last checkpoint will be taken before it" \
  "the job ends in [0-9]+ s \((squeue|scontrol)\): checkpointing step $step now, while it still fits" \
  "rank 0/2.*the job's end is near \(--deadline\): checkpointed at step $step; exiting with code 3" \
  "rank 1/2.*the job's end is near \(--deadline\): checkpointed at step $step; exiting with code 3" \
  "checkpointed \(exit 3\) before the job's end \(--deadline, no signal\): requeueing job $job as restart 1"
CASES=$((CASES + 1))
if grep -q "received SIG" "$log"; then fail "a signal reached the batch shell: $(grep 'received SIG' "$log")"
else pass "the batch shell received no signal"; fi

printf 'steps-per-run = 10\ndeadline-margin = 5\n' >"$MNDDP_CONFIG"
release "$job"
wait_until 120 job_ended "$job" || fail "job $job did not end within 120 s of its release"
expect_job "the successor completes" "$job" COMPLETED 0:0 1
expect_log "... after resuming from step $step and running 10 steps" "$log" \
  "resumed from '.*/step-$(printf '%08d' "$step").h5'" "steps-per-run 10 reached" 'finished after 1 restart\(s\)$'

# The same steps without interruption (mpirun here, 2 ranks, no fault): bitwise the same state.
run_mpi 2 120 "${ARGS[@]}" --steps-per-run $((step + 10)) --checkpoint-dir "$WORK/straight" --metrics-file ""
CASES=$((CASES + 1))
if [ "$RC" = 0 ] && [ "$(cat "$WORK/straight/latest")" = "$(cat "$ckpt/latest")" ] &&
  "$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py" "$WORK/straight/$(cat "$WORK/straight/latest")" \
    "$ckpt/$(cat "$ckpt/latest")" >"$WORK/cmp" 2>&1; then
  pass "the requeued run ended bitwise identical to an uninterrupted one ($(cat "$ckpt/latest"))"
else
  fail "requeued against uninterrupted: rc $RC, $(cat "$WORK/straight/latest" 2>&1) vs $(cat "$ckpt/latest" 2>&1): $(cat "$WORK/cmp" 2>/dev/null)"$'\n'"$ERR"
fi
CASES=$((CASES + 1))
if [ "$(cat "$ckpt/stop-reason" 2>&1)" = steps-per-run ]; then pass "stop-reason after the successor: steps-per-run"
else fail "stop-reason: $(cat "$ckpt/stop-reason" 2>&1)"; fi

# A bad option ends the job in the batch shell, before srun, with mnddp's own message and exit code 2.
log=$WORK/refused.out
submit job --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=1 --time=1 --output="$log" \
  "$SLURM_DIR/train_requeue.sbatch" "${ARGS[@]}" --batch-size 0
wait_until 60 job_ended "$job" || fail "job $job did not end within 60 s"
expect_job "a bad option fails the job before srun" "$job" FAILED 2:0
expect_log "... naming the option" "$log" "mnddp train refused the options \(exit 2\): .*--batch-size"
CASES=$((CASES + 1))
if grep -q "srun --mpi" "$log"; then fail "srun ran: $(grep 'srun --mpi' "$log")"; else pass "no job step ran"; fi
finish
