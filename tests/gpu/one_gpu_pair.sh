#!/usr/bin/env bash
# Starts one rank of a multi-rank NCCL test (under mpiexec: `mpiexec -np 2 one_gpu_pair.sh PROGRAM ARGS`).
# Where this host has fewer GPUs than ranks, the ranks share a GPU, which NCCL refuses as a duplicate
# ("Duplicate GPU detected") unless each rank claims a host of its own: NCCL_HOSTID overrides the host
# NCCL's check compares, and NCCL then connects the ranks like two nodes, over sockets on loopback.
# Their kernels time-slice on the one GPU: fine for correctness, not a measure of speed.
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
local_size=${OMPI_COMM_WORLD_LOCAL_SIZE:-1}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt "$local_size" ]; then
  export NCCL_HOSTID="mnddp-pair-$rank" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
fi
exec "$@"
