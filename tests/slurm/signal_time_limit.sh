# --signal=B:USR2@LEAD near a short --time limit, with slurm/train_requeue.sbatch on 2 nodes x 1 task:
# Slurm warns the batch shell before the limit on its own, the ranks checkpoint, the job requeues
# itself and the next segment resumes from that step.
#
# What Slurm 22.05 does (measured here, docs/SLURM.md): slurmctld checks time limits every 30 s and
# sends the warning at the first check at which the job would reach its warning time before the
# next one, so it comes 0-30 s *before* limit - LEAD, never after (on an idle controller); the limit
# itself is enforced up to 30 s late. Here: --time=2 (120 s), LEAD 85 s, so the warning is due 35 s
# after the start and arrives between 5 and 35 s: after start-up, long before the limit.
#
# The first segment would train for far longer than that. The second reads a changed config file
# (steps-per-run = 10): it resumes, runs 10 steps, checkpoints and completes.
source "$(dirname "$0")/lib.sh"
use_cluster
make_data
LIMIT=120
LEAD=85

export MNDDP_CONFIG=$WORK/run.ini
echo "steps-per-run = 0" >"$MNDDP_CONFIG"
log=$WORK/signal.out
submit job --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=1 --time=$((LIMIT / 60)) \
  --signal=B:USR2@$LEAD --output="$log" "$SLURM_DIR/train_requeue.sbatch" \
  "${DATA[@]}" --batch-size 8 --epochs 100000 --hidden 32 --log-interval 50
if wait_until $((LIMIT + 30)) job_requeued "$job"; then
  CASES=$((CASES + 1))
  pass "the job requeued itself before its time limit (restart $(job_field "$job" Restarts))"
else
  fail "job $job was not requeued (state $(job_field "$job" JobState))"$'\n'"$(tail -20 "$log")"
  finish
  exit
fi

# When did the warning come? Seconds from the job's first line to the shell's "received SIGUSR2".
seconds_of() { IFS=: read -r h m s <<<"$1" && echo $((10#$h * 3600 + 10#$m * 60 + 10#$s)); }
started=$(sed -n 's/^\[train_requeue.sbatch \([0-9:]*\)\] job .* restart 0 .*/\1/p' "$log" | head -1)
warned=$(sed -n 's/^\[train_requeue.sbatch \([0-9:]*\)\] received SIGUSR2.*/\1/p' "$log" | head -1)
CASES=$((CASES + 1))
if [ -n "$started" ] && [ -n "$warned" ]; then
  elapsed=$(($(seconds_of "$warned") - $(seconds_of "$started")))
  ((elapsed < 0)) && elapsed=$((elapsed + 86400))
  due=$((LIMIT - LEAD))
  # 1 s of slack each way for the log's whole-second clock.
  if ((elapsed >= due - 31 && elapsed <= due + 1)); then
    pass "SIGUSR2 came ${elapsed} s after the start: requested at ${due} s (limit ${LIMIT} s - lead ${LEAD} s), Slurm's window is $((due - 30))-${due} s"
  else
    fail "SIGUSR2 came ${elapsed} s after the start, outside $((due - 30))-${due} s"
  fi
else
  fail "no start or warning time in the log (start '$started', warning '$warned')"
fi
step=$(sed -n 's/.*preemption signal 12: checkpointed at step \([0-9]*\);.*/\1/p' "$log" | sort -u)
[[ "$step" =~ ^[0-9]+$ ]] || step=0
expect_log "both ranks checkpointed at step $step, the script requeued the job" "$log" \
  "rank 0/2.*preemption signal 12: checkpointed at step $step; exiting with code 3" \
  "rank 1/2.*preemption signal 12: checkpointed at step $step; exiting with code 3" \
  "requeueing job $job as restart 1"

echo "steps-per-run = 10" >"$MNDDP_CONFIG"
release "$job"
wait_until 120 job_ended "$job" || fail "job $job did not end within 120 s of its release"
expect_job "the second segment completes" "$job" COMPLETED 0:0 1
expect_log "... after resuming from step $step and running 10 steps" "$log" \
  "job $job \(mnddp\) restart 1 \(SLURM_RESTART_COUNT\)" "resumed from '.*/step-$(printf '%08d' "$step").h5'" \
  "steps-per-run 10 reached" 'finished after 1 restart\(s\)$'
finish
