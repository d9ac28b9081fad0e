# A node lost mid-run, inside the allocation (slurm/train_resilient.sbatch on the local cluster's
# "resilient" partition, 2 tasks per node, node-local checkpoints every 4 steps in each node's own
# TmpFS directory, file-system checkpoints every 64): every task on n2 is killed with SIGKILL and
# n2's node-local directory wiped, as a lost node would leave them. The script names n2, leaves it out
# and launches again at once inside the same job; mnddp restores from what survives.
#   node_loss.sh plain   --zero 0, 2 nodes + 1 spare: n1 + n3 go on from n1's local copy; the final
#                        checkpoint is bitwise the uninterrupted run's
#   node_loss.sh zero    --zero 2: n2's shares come from their partner copies on n1; bitwise again.
#                        Then the same with n1's partner copies wiped too: no local step is complete,
#                        the run says so and resumes from --checkpoint-dir; bitwise still.
#   node_loss.sh shrink  --zero 0, 2 nodes, no spare: n1 goes on alone with 2 ranks, the checkpoint's
#                        global batch kept by accumulation, and completes
source "$(dirname "$0")/lib.sh"
MODE=${1:?usage: node_loss.sh plain|zero|shrink}
use_cluster
# The fake nodes oversubscribe this host's two cores, and a rank's checkpoint writers wait in MPI
# beside its training thread: with Open MPI polling without yielding, a 4-rank step took 400-800 ms
# here instead of 10. Yielding, as Open MPI does on a node it knows is oversubscribed (sbatch passes
# the environment to the jobs).
export OMPI_MCA_mpi_yield_when_idle=1
make_data 1024
CLUSTER_DIR=$(cd "$MNDDP_SLURM_CLUSTER" && pwd -P)
COMPARE=("$MNDDP_PYTHON" "$MNDDP_SOURCE_DIR/tests/e2e/compare_checkpoints.py")
# 1024 samples / (4 ranks x 8) = 32 steps per epoch, 640 in all.
TRAIN=("${DATA[@]}" --batch-size 8 --epochs 20 --hidden 32 --dropout 0.1 --log-interval 4 --checkpoint-interval 64)
case $MODE in
  zero) TRAIN+=(--zero 2 --optimizer adamw --lr 0.003) ;;
  *) TRAIN+=(--optimizer sgd --lr 0.05) ;;
esac
# Each node's own directory: the node's TmpFS as its jobs see it (tests/slurm/local_cluster.sh), one
# per run (a directory belongs to one run's --checkpoint-dir).
local_options() { echo --local-checkpoint-dir "$CLUSTER_DIR/nodetmp/local-$1" --local-checkpoint-interval 4; }
local_dir_of() { echo "$CLUSTER_DIR/nt-$1/local-$2"; }

# The uninterrupted reference under mpirun: same ranks, same batch, same summation order.
if [ "$MODE" != shrink ]; then
  run_mpi 4 180 "${TRAIN[@]}" --checkpoint-dir "$WORK/straight" --metrics-file ""
  [ "$RC" = 0 ] || { fail "the reference run failed (rc $RC): $ERR"; finish; exit; }
fi

# node_pids JOB NODE: the mnddp processes of the job's first launch (step 0) on that node, by their
# Slurm environment.
node_pids() {
  local pid environment
  for pid in $(pgrep -x mnddp); do
    environment=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null) || continue  # gone meanwhile
    if grep -qx "SLURM_JOB_ID=$1" <<<"$environment" && grep -qx "SLURMD_NODENAME=$2" <<<"$environment" &&
      grep -qx "SLURM_STEP_ID=0" <<<"$environment"; then
      echo "$pid"
    fi
  done
}
no_pids_on() { [ -z "$(node_pids "$1" "$2")" ]; }

# lose_node JOB NODE RUN: what a lost node leaves: its tasks gone at once, its local storage gone.
lose_node() {
  local pids
  pids=$(node_pids "$1" "$2")
  [ -n "$pids" ] || { fail "no mnddp process of job $1 on $2"; return 1; }
  # shellcheck disable=SC2086  # one word per pid
  kill -9 $pids
  LOST_AT=$(date +%s.%N)
  rm -rf "$(local_dir_of "$2" "$3")"
}

# run_losing_node NAME NODES SPARES [AFTER]: submits, waits for step 100, loses n2, then runs the
# command AFTER (with the job id), and waits for the job's end.
run_losing_node() {
  local name=$1 nodes=$2 spares=$3 after=${4:-}
  LOG=$WORK/$name.out
  submit job --partition=resilient --nodes="$nodes" --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 \
    --time=10 --output="$LOG" --export=ALL,MNDDP_SPARE_NODES="$spares" \
    "$SLURM_DIR/train_resilient.sbatch" "${TRAIN[@]}" $(local_options "$name")
  if ! wait_until 120 log_has "$LOG" 'step [1-5][0-9][0-9]/'; then
    fail "$name: no step 100 within 120 s"$'\n'"$(tail -20 "$LOG")"
    return 1
  fi
  lose_node "$job" n2 "$name" || return 1
  [ -z "$after" ] || "$after" "$job"
  wait_until 180 job_ended "$job" || fail "$name: job $job still runs 180 s after n2 was lost"
  expect_job "$name: the job goes on without n2 and completes" "$job" COMPLETED 0:0
}

run_dir_of() { echo "$WORK/runs/mnddp-$1"; }

# recovery_time: seconds from the loss to the first step the relaunched job logged (docs/BENCHMARKS.md).
recovery_time() {
  local first
  first=$(sed -n '/restore: /,$p' "$LOG" | grep -m1 -E '^\[[0-9-]+ [0-9:.]+\] \[rank 0/[0-9]+\] \[info\] epoch [0-9]+ step [0-9]+/' |
    cut -c2-24)
  [ -n "$first" ] && "$MNDDP_PYTHON" -c "print(f'{$(date -d "$first" +%s.%N) - $LOST_AT:.1f}')"
}

case $MODE in
  plain)
    run_losing_node plain 3 1 || { finish; exit; }
    expect_log "... n2 named, left out, the spare n3 takes its place at the same world size" "$LOG" \
      'leaving out n2$' 'launch 1 on n1 n3 \(4 ranks\)' \
      'restore: step [0-9]+ from the node-local level in [0-9.]+ s: n1 \(ranks 0-1\) its own copy; n3 \(ranks 2-3\) n1.s copy \([0-9.]+ MB in [0-9.]+ s\)' \
      'finished after 1 restart'
    echo "recovery: $(recovery_time) s from the loss of n2 to the first step on n1 + n3 (node-local level)"
    expect_log "... restarts.log says why" "$(run_dir_of "$job")/restarts.log" \
      'launch 0 on n1,n2: exit [0-9]+ after [0-9]+ s; the failed node\(s\) n2' 'launch 1 on n1,n3: finished'
    check "restored from a local step, continued bitwise to the uninterrupted run's end" \
      "${COMPARE[@]}" "$WORK/straight/step-00000640.h5" "$(run_dir_of "$job")/checkpoints/step-00000640.h5"
    ;;
  zero)
    run_losing_node zero 3 1 || { finish; exit; }
    expect_log "... n2's shares restored from their partner copies on n1" "$LOG" \
      'restore: step [0-9]+ from the node-local level in [0-9.]+ s: n1 \(ranks 0-1\) its own copy, assembled from the base and 4 shares in [0-9.]+ s; n3 \(ranks 2-3\) n1.s copy' \
      'finished after 1 restart'
    echo "recovery: $(recovery_time) s from the loss of n2 to the first step on n1 + n3 (partner copies)"
    check "--zero 2, restored from partner copies, continued bitwise" \
      "${COMPARE[@]}" "$WORK/straight/step-00000640.h5" "$(run_dir_of "$job")/checkpoints/step-00000640.h5"
    # The partner copies of n2's shares (on n1) gone too, before the relaunch lists what survived.
    # n1's ranks of the first launch are frozen at the loss (SIGSTOP), so none can commit another
    # copy while the copies are removed; a commit finished in the instant Slurm wakes them to end
    # them is removed as they vanish, well before the relaunch (a new srun, MPI start-up) can list
    # the directory. Waiting for them to end before the first removal raced the relaunch. No
    # node-local step is then complete; the newest may also lack pieces n1 was still writing, which
    # the report names too.
    wipe_partner_copies() {
      local pids partner_copies
      partner_copies="$(local_dir_of n1 zero-fallback)/step-*.share-00000[23]-of-000004.h5"
      pids=$(node_pids "$1" n1)
      # shellcheck disable=SC2086  # one word per pid
      [ -z "$pids" ] || kill -STOP $pids
      # shellcheck disable=SC2086  # the glob is meant
      rm -f $partner_copies
      local deadline=$((SECONDS + 60))
      until no_pids_on "$1" n1; do
        ((SECONDS < deadline)) || { fail "n1's ranks still run 60 s after n2 was lost"; return 1; }
        sleep 0.05
      done
      # shellcheck disable=SC2086
      rm -f $partner_copies
    }
    run_losing_node zero-fallback 3 1 wipe_partner_copies || { finish; exit; }
    expect_log "... both copies of n2's shares gone: the run says so and resumes from --checkpoint-dir" "$LOG" \
      "restore: from --checkpoint-dir .* \(the node-local level has no complete checkpoint \(step [0-9]+: (.*; )?the shares of ranks ([01], )*2, 3 \(of 4\) are on no surviving node\)\)" \
      'finished after 1 restart'
    echo "recovery: $(recovery_time) s from the loss of n2 to the first step on n1 + n3 (--checkpoint-dir)"
    check "... and still continues bitwise" \
      "${COMPARE[@]}" "$WORK/straight/step-00000640.h5" "$(run_dir_of "$job")/checkpoints/step-00000640.h5"
    ;;
  shrink)
    run_losing_node shrink 2 0 || { finish; exit; }
    expect_log "... n1 goes on alone, keeping the global batch" "$LOG" \
      'launch 1 on n1 \(2 ranks, shrunk from 4 \(no spare left\)\)' \
      'resume on 2 ranks: --grad-accum-steps 1 -> 2 keeps the checkpoint.s global batch of 32' \
      'restore: step [0-9]+ from the node-local level' 'finished after 1 restart'
    ;;
esac
finish
