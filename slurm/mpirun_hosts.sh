#!/usr/bin/env bash
# Ad-hoc multi-node training without Slurm (or where srun has no PMIx): Open MPI's mpirun over a
# hostfile. mpirun starts the remote ranks through ssh, whose environment is not this shell's, so
# every variable mnddp, torch, NCCL and Open MPI read is exported to them with -x.
#
# Usage: slurm/mpirun_hosts.sh HOSTFILE [mnddp train options]
#   HOSTFILE, Open MPI's format: one line per node, "node01 slots=4" (slots = ranks = GPUs there)
#   slurm/mpirun_hosts.sh hosts.txt --config run.ini
# Needs: password-less ssh to every node, the same paths (binary, data, venv) on every node.
#
# Environment (optional):
#   MNDDP_BIN     the mnddp binary (default: <this script's repository>/build/mnddp, else the installed
#                 tree's bin/mnddp, else mnddp on PATH)
#   NP            number of ranks (default: the sum of the hostfile's slots)
#   MPIRUN        the launcher (default: mpirun)
#   MPIRUN_ARGS   more mpirun options, split at spaces, e.g. "--mca btl_tcp_if_include eth0"
#   MNDDP_<OPTION>, NCCL_*, OMP_*, CUDA_*, UCX_*, HDF5_*, TORCH_*, PYTORCH_*: passed to every rank
#
# Binding: mpirun binds each rank to one core by default (up to 2 ranks) or one socket, which
# squeezes a rank's torch threads and data loader onto one core. --bind-to none lets the OS place
# them; OMP_NUM_THREADS (default: the node's cores / its slots) sizes the pools. For strict
# placement use MPIRUN_ARGS="--map-by ppr:4:node:PE=8 --bind-to core" (4 ranks, 8 cores each).
set -euo pipefail

die() { echo "mpirun_hosts: error: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: $0 HOSTFILE [mnddp train options]"
hostfile=$1
shift
[ -r "$hostfile" ] || die "cannot read the hostfile '$hostfile'"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The binary: MNDDP_BIN, else this source tree's build, else the installed tree's (this script in
# <prefix>/share/mnddp/slurm), else mnddp on PATH (module load mnddp).
if [ -z "${MNDDP_BIN:-}" ]; then
  MNDDP_BIN=$(dirname "$here")/build/mnddp
  [ -x "$MNDDP_BIN" ] || [ ! -x "$here/../../../bin/mnddp" ] || MNDDP_BIN=$(cd "$here/../../../bin" && pwd)/mnddp
  [ -x "$MNDDP_BIN" ] || MNDDP_BIN=$(command -v mnddp || echo "$MNDDP_BIN")
fi
[ -x "$MNDDP_BIN" ] || die "no mnddp binary at $MNDDP_BIN (set MNDDP_BIN, or module load mnddp)"

# Slots per node and in all (a line without slots= counts as one slot, as Open MPI counts it).
read -r nodes slots < <(awk '!/^[[:space:]]*(#|$)/ {
    n++; s = 1
    for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { sub(/^slots=/, "", $i); s = $i }
    total += s; if (s > max) max = s
  } END { print n + 0, total + 0 }' "$hostfile")
[ "$slots" -gt 0 ] || die "no hosts in '$hostfile'"
np=${NP:-$slots}
per_node=$(((slots + nodes - 1) / nodes))
# This node's cores shared among its ranks; the others are assumed to be alike.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(($(nproc) / per_node > 0 ? $(nproc) / per_node : 1))}

# OMPI_MCA_* variables need no -x: mpirun passes them to its remote daemons itself.
exports=()
while IFS= read -r name; do exports+=(-x "$name"); done < <(compgen -e |
  grep -E '^(PATH|LD_LIBRARY_PATH|OMPI_ALLOW_RUN_AS_ROOT.*|(MNDDP|NCCL|OMP|CUDA|UCX|HDF5|TORCH|PYTORCH)_.*)$' |
  grep -vx 'MNDDP_BIN')

# shellcheck disable=SC2206  # word splitting of the user's extra options is intended
extra=(${MPIRUN_ARGS:-})
placement=()
[[ " ${extra[*]} " == *" --map-by "* ]] || placement+=(--map-by slot)
[[ " ${extra[*]} " == *" --bind-to "* ]] || placement+=(--bind-to none)
# When a rank dies, mpirun sends the others SIGTERM and SIGKILL one second later by default: five
# give every survivor time to write its incident record (docs/FAULT_TOLERANCE.md).
[[ " ${extra[*]} " == *"odls_base_sigkill_timeout"* ]] || placement+=(--mca odls_base_sigkill_timeout 5)
cmd=("${MPIRUN:-mpirun}" --hostfile "$hostfile" -np "$np" "${placement[@]}" "${exports[@]}" "${extra[@]}"
  "$MNDDP_BIN" train "$@")
echo "[mpirun_hosts] $np ranks on $nodes node(s), OMP_NUM_THREADS=$OMP_NUM_THREADS: ${cmd[*]}"
exec "${cmd[@]}"
