#!/usr/bin/env bash
# Interactive debugging on a few nodes: a short training run where srun labels every output line with
# its rank (srun -l), every rank logs (--log-all-ranks), and NCCL reports how it set up its rings
# and which network it chose (NCCL_DEBUG=INFO).
#
# Usage: slurm/debug_salloc.sh [mnddp train options]
#   Outside an allocation it asks for one (salloc) and runs itself inside it; inside one (an salloc
#   shell, or SLURM_JOB_ID=<id> of an allocation made with `salloc --no-shell`) it runs srun there,
#   so one allocation can serve many tries:
#     salloc --no-shell --nodes=2 --ntasks-per-node=4 --gpus-per-node=4 --time=1:00:00   # prints the id
#     SLURM_JOB_ID=<id> slurm/debug_salloc.sh --config run.ini
#     scancel <id>                                                                      # when done
#
# Environment (optional):
#   DEBUG_NODES (2), DEBUG_TASKS_PER_NODE (4), DEBUG_GPUS_PER_NODE (= tasks per node; 0 for none),
#   DEBUG_CPUS_PER_TASK (4), DEBUG_TIME (00:20:00), DEBUG_SALLOC_ARGS (more salloc options, e.g.
#   "--partition=debug --account=proj"), DEBUG_STEPS (20: --max-steps of the run),
#   MNDDP_BIN (<this script's repository>/build/mnddp, else the installed or PATH's mnddp), MNDDP_CONFIG and MNDDP_<OPTION> as for training.
#
# Looking at a running job from outside (a batch job that hangs, say): --overlap starts a step beside
# the job's own, on the CPUs and GPUs it already holds, instead of queueing behind it.
#   srun --overlap --jobid=<id> --nodelist=<node> --ntasks=1 --pty bash         # a shell on its node
#   srun --overlap --jobid=<id> --ntasks-per-node=1 nvidia-smi                  # every node's GPUs
#   srun --overlap --jobid=<id> --ntasks-per-node=1 bash -c \
#     'for p in $(pgrep -x mnddp); do gdb -p $p -batch -ex "thread apply all bt"; done'   # stacks
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nodes=${DEBUG_NODES:-2}
tasks_per_node=${DEBUG_TASKS_PER_NODE:-4}
gpus_per_node=${DEBUG_GPUS_PER_NODE:-$tasks_per_node}
cpus_per_task=${DEBUG_CPUS_PER_TASK:-4}

if [ -z "${SLURM_JOB_ID:-}" ]; then
  salloc_args=(--nodes="$nodes" --ntasks-per-node="$tasks_per_node" --cpus-per-task="$cpus_per_task"
    --time="${DEBUG_TIME:-00:20:00}" --job-name=mnddp-debug)
  [ "$gpus_per_node" = 0 ] || salloc_args+=(--gpus-per-node="$gpus_per_node")
  # shellcheck disable=SC2206  # word splitting of the user's extra options is intended
  salloc_args+=(${DEBUG_SALLOC_ARGS:-})
  echo "[debug_salloc] salloc ${salloc_args[*]}"
  # salloc runs this script again on this host, inside the allocation (SLURM_JOB_ID set).
  exec salloc "${salloc_args[@]}" "${BASH_SOURCE[0]}" "$@"
fi

# The binary: MNDDP_BIN, else this source tree's build, else the installed tree's (this script in
# <prefix>/share/mnddp/slurm), else mnddp on PATH (module load mnddp).
if [ -z "${MNDDP_BIN:-}" ]; then
  MNDDP_BIN=$(dirname "$here")/build/mnddp
  [ -x "$MNDDP_BIN" ] || [ ! -x "$here/../../../bin/mnddp" ] || MNDDP_BIN=$(cd "$here/../../../bin" && pwd)/mnddp
  [ -x "$MNDDP_BIN" ] || MNDDP_BIN=$(command -v mnddp || echo "$MNDDP_BIN")
fi
[ -x "$MNDDP_BIN" ] || { echo "[debug_salloc] error: no mnddp binary at $MNDDP_BIN (set MNDDP_BIN, or module load mnddp)" >&2; exit 2; }
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
cpus=${SLURM_CPUS_PER_TASK:-$cpus_per_task}
export OMP_NUM_THREADS=$cpus

# Inside an allocation made elsewhere (SLURM_JOB_ID only), srun takes the allocation's shape from
# the job; the -N/--ntasks-per-node here only matter when they are smaller.
srun_args=(-l --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task="$cpus" --cpu-bind=cores)
[ -n "${SLURM_NTASKS:-}" ] || srun_args+=(--nodes="$nodes" --ntasks-per-node="$tasks_per_node")
# A short run that leaves nothing behind: no checkpoints, no metrics file. Set as MNDDP_* variables,
# which beat the config file and lose to the command line (mnddp refuses an option given twice).
export MNDDP_MAX_STEPS=${DEBUG_STEPS:-20} MNDDP_LOG_INTERVAL=1 MNDDP_LOG_ALL_RANKS=true MNDDP_CHECKPOINT_DIR= \
  MNDDP_METRICS_FILE=
echo "[debug_salloc] job $SLURM_JOB_ID: srun ${srun_args[*]} $MNDDP_BIN train $* (debug: MNDDP_MAX_STEPS=$MNDDP_MAX_STEPS," \
  "MNDDP_LOG_INTERVAL=1, MNDDP_LOG_ALL_RANKS=true, no checkpoints, no metrics file)"
exec srun "${srun_args[@]}" "$MNDDP_BIN" train "$@"
