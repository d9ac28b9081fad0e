# slurm/mpirun_hosts.sh with a hostfile naming this host twice, as "localhost" and as 127.0.0.2:
# Open MPI takes the second for another node and starts its ranks through the rsh launcher, here
# tests/slurm/fake_ssh.sh (a clean environment and its own hostname, as on a real remote node). The run
# has 4 ranks on 2 nodes with local ranks 0 and 1 on each, and the remote ranks got the environment
# only through the script's -x list: OMP_NUM_THREADS=3 gives every rank 3 threads (without it a
# remote rank would pick cores / ranks = 1).
source "$(dirname "$0")/lib.sh"
make_data
printf '# two "nodes" on one host\nlocalhost slots=2\n127.0.0.2 slots=2\n' >"$WORK/hosts"
# Ranks on two "nodes" of one host: UCX over TCP on loopback, as in the Slurm jobs.
source "$MNDDP_SOURCE_DIR/tests/slurm/loopback_mpi.env"
export FAKE_SSH_LOG=$WORK/ssh.log MPIRUN_ARGS="--mca plm_rsh_agent $MNDDP_SOURCE_DIR/tests/slurm/fake_ssh.sh"
unset MNDDP_THREADS  # so that each rank derives its threads from its own environment
OMP_NUM_THREADS=3 timeout 120 bash "$SLURM_DIR/mpirun_hosts.sh" "$WORK/hosts" "${DATA[@]}" --batch-size 8 \
  --epochs 2 --hidden 32 --metrics-file "" >"$WORK/run.out" 2>&1
rc=$?
CASES=$((CASES + 1))
if [ "$rc" = 0 ]; then pass "mpirun_hosts.sh exit 0"; else fail "mpirun_hosts.sh: rc $rc"$'\n'"$(tail -30 "$WORK/run.out")"; fi
expect_log "4 ranks on two nodes, local ranks 0 and 1 on each, 3 threads each (OMP_NUM_THREADS through -x)" \
  "$WORK/run.out" 'rank 0/4 host [^ ]+ node 0/2 local rank 0/2 .* threads 3$' \
  'rank 1/4 host [^ ]+ node 0/2 local rank 1/2 .* threads 3$' \
  'rank 2/4 host 127\.0\.0\.2 node 1/2 local rank 0/2 .* threads 3$' \
  'rank 3/4 host 127\.0\.0\.2 node 1/2 local rank 1/2 .* threads 3$' \
  '^final validation accuracy: (0\.9[0-9]*|1\.0+)$'
expect_log "the script's command: hostfile, 4 slots, no binding, the environment by -x" "$WORK/run.out" \
  '^\[mpirun_hosts\] 4 ranks on 2 node\(s\), OMP_NUM_THREADS=3: .*--hostfile .* -np 4 --map-by slot --bind-to none .*-x OMP_NUM_THREADS'
expect_log "the second node's daemon was started through the (fake) ssh" "$WORK/ssh.log" '^127\.0\.0\.2 .*orted'

# A bad hostfile argument: exit 2 and a message, before mpirun.
bash "$SLURM_DIR/mpirun_hosts.sh" "$WORK/missing" >"$WORK/bad.out" 2>&1
rc=$?
CASES=$((CASES + 1))
if [ "$rc" = 2 ] && grep -q "cannot read the hostfile" "$WORK/bad.out"; then
  pass "a missing hostfile: exit 2, $(cat "$WORK/bad.out")"
else
  fail "missing hostfile: rc $rc: $(cat "$WORK/bad.out")"
fi
finish
