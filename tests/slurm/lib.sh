# Helpers for the slurm tests: the e2e helpers (WORK, pass/fail/finish), the local cluster's client
# environment, a small dataset, and job control with deadlines. Every job a test submits is
# cancelled when the test ends, whatever happened.
# Expects MNDDP_SLURM_CLUSTER (the state directory of tests/slurm/local_cluster.sh, started by the
# ctest fixture) besides what tests/e2e/lib.sh expects.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
: "${MNDDP_SOURCE_DIR:?}"
SLURM_DIR=$MNDDP_SOURCE_DIR/slurm
CLUSTER=$MNDDP_SOURCE_DIR/tests/slurm/local_cluster.sh
JOBS=()

cleanup() {
  if ((${#JOBS[@]})) && [ -n "${SLURM_CONF:-}" ]; then scancel "${JOBS[@]}" 2>/dev/null || true; fi
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# use_cluster: point the Slurm clients at the test cluster and give jobs the loopback MPI settings.
use_cluster() {
  : "${MNDDP_SLURM_CLUSTER:?set by ctest: the state directory of the local cluster}"
  eval "$(bash "$CLUSTER" env "$MNDDP_SLURM_CLUSTER")"
  if ! bash "$CLUSTER" status "$MNDDP_SLURM_CLUSTER" >"$WORK/status" 2>&1; then
    cat "$WORK/status"
    echo "FAIL: the local Slurm cluster is not up (ctest fixture slurm_cluster_start)"
    exit 1
  fi
  # The scripts read these: the binary under test, run directories inside WORK.
  export MNDDP_BIN MNDDP_RUN_ROOT=$WORK/runs
  # Jobs take their threads from the allocation, as on a real cluster, not from the test harness.
  unset MNDDP_THREADS
  # A rank that crashes leaves a core in the job's working directory (Slurm propagates the limit
  # and jobs start in the submit directory): expect_job prints its backtrace and keeps it.
  ulimit -c unlimited 2>/dev/null || true
  cd "$WORK" || exit 1
}

# job_diagnosis ID: what a failed job left: its output's tail, and the backtrace of every core
# dumped in $WORK. Cores, logs and the binary's path are kept in the cluster directory's failures/
# (WORK is removed at exit), so that a rare crash can be examined after the run.
job_diagnosis() {
  local id=$1 out keep
  out=$(job_field "$id" StdOut)
  [ -n "$out" ] && [ -f "$out" ] && printf -- '--- job %s output (%s), last 40 lines:\n%s\n' "$id" "$out" "$(tail -40 "$out")"
  keep=${MNDDP_SLURM_CLUSTER:-$WORK}/failures/$(basename "$0" .sh)-job$id-$(date +%H%M%S)
  mkdir -p "$keep"
  [ -n "$out" ] && [ -f "$out" ] && cp "$out" "$keep/"
  echo "$MNDDP_BIN" >"$keep/binary"
  cp "${MNDDP_SLURM_CLUSTER:-/nonexistent}"/log/*.log "$keep/" 2>/dev/null  # the next start clears them
  local core
  for core in "$WORK"/core*; do
    [ -f "$core" ] || continue
    echo "--- $core: backtrace (gdb)"
    timeout 120 gdb -batch -nx -ex 'bt 30' -ex 'info registers' -ex 'thread apply all bt 12' "$MNDDP_BIN" "$core" 2>&1 |
      grep -v '^\[New LWP\|^warning:' | head -150
    mv "$core" "$keep/"
  done
  echo "--- kept in $keep"
}

# make_data [TRAIN_SAMPLES]: a small 4-class dataset in $WORK/data, and DATA=(mnddp options for it).
make_data() {
  "$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples "${1:-512}" --val-samples 128 --shards 4 \
    --shape 1,6,6 --classes 4 --seed 7 >/dev/null
  DATA=(--train-data "$WORK/data/train_*.h5" --val-data "$WORK/data/val_*.h5" --num-classes 4)
}

# submit VAR sbatch-args...: submits, records the job for cleanup, and sets VAR to its id.
submit() {
  local var=$1 id
  shift
  id=$(sbatch --parsable "$@") || { echo "FAIL: sbatch $*"; exit 1; }
  id=${id%%;*}
  JOBS+=("$id")
  printf -v "$var" '%s' "$id"
}

# job_field ID NAME: a field of `scontrol show job` (JobState, ExitCode, Restarts, Reason, ...).
job_field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# wait_until SECONDS COMMAND...: polls COMMAND every 0.5 s; false when SECONDS pass first.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

job_ended() { [ -z "$(squeue -h -j "$1" -o %T 2>/dev/null)" ]; }
job_running() { [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = RUNNING ]; }
job_requeued_or_ended() { job_requeued "$1" || job_ended "$1"; }
# job_requeued ID [N]: pending again after its Nth restart (a fresh job is pending too, at restart 0).
job_requeued() {
  [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = PENDING ] && [ "$(job_field "$1" Restarts)" -ge "${2:-1}" ]
}
log_has() { grep -qE -- "$2" "$1" 2>/dev/null; }

# steps_gone ID: no slurmstepd of job ID is left on this host. A requeued job keeps its id, and a
# step started while the previous run's slurmstepd is still exiting fails to bind its PMIx socket
# (Slurm's own 120 s requeue delay normally prevents that; the tests skip the delay).
steps_gone() { ! pgrep -f "^slurmstepd: \[$1\." >/dev/null; }

# release ID: start a requeued (held by BeginTime) job in 2 s instead of in 120 s. Slurm's hold
# (cred_expire) is what keeps a successor off the nodes until its old incarnation has left them, and
# skipping it must keep that promise: the old slurmstepd must be gone, and the successor's credential
# must be issued in a later second than the requeue revoked the old one's. slurmd compares the two in
# whole seconds (ctime <= revoked: "Job credential revoked"), so a successor started within the
# requeue's second was killed at once as a non-startable batch job, FAILED 1:0, ending the chain.
release() {
  wait_until 30 steps_gone "$1" || echo "warning: job $1's old slurmstepd still runs"
  scontrol update JobId="$1" StartTime=now+2
}

# expect_job NAME ID STATE EXIT_CODE [RESTARTS]: the ended job's state, exit code "rc:signal" and
# restart count.
expect_job() {
  local name=$1 id=$2 state=$3 code=$4 restarts=${5:-0}
  CASES=$((CASES + 1))
  local got
  got="$(job_field "$id" JobState) $(job_field "$id" ExitCode) $(job_field "$id" Restarts)"
  if [ "$got" = "$state $code $restarts" ]; then
    pass "$name: job $id $got"
    return 0
  fi
  fail "$name: job $id is '$got', expected '$state $code $restarts'"
  job_diagnosis "$id"
  return 1
}

# expect_log NAME FILE REGEX...: every extended regular expression matches a line of FILE.
expect_log() {
  local name=$1 file=$2
  shift 2
  CASES=$((CASES + 1))
  for re in "$@"; do
    if ! grep -qE -- "$re" "$file"; then
      fail "$name: no line matches /$re/ in $file; its restore, error and launch lines:"$'\n'"$(grep -m20 -E 'restore:|error|fatal|launch [0-9]' "$file")"$'\n'"... and its end:"$'\n'"$(tail -40 "$file")"
      return 1
    fi
  done
  pass "$name"
}
