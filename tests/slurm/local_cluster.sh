#!/usr/bin/env bash
# A real Slurm cluster of three nodes on this one host, owned by the slurm tests: a private munged,
# one slurmctld and three slurmd ("n1", "n2", "n3", 2 CPUs each), with every file under one state
# directory. The default partition "debug" has n1 and n2; "resilient" has all three, so that a job
# can hold a spare node (tests/slurm/node_loss.sh).
#
# Usage: tests/slurm/local_cluster.sh start|stop|status|env [DIR]
#   DIR      state directory: the argument, else $MNDDP_SLURM_CLUSTER, else ./slurm-cluster
#   start    stop whatever an earlier start in DIR left running, write slurm.conf, start the
#            daemons and wait until every node is idle (exit 1 with the logs' tails if not)
#   stop     cancel all jobs, shut the daemons down and kill what is left of the processes this
#            script started (by pid, checked against their start time); safe to repeat
#   status   daemons and nodes; exit 0 when every daemon runs and every node answers
#   env      print the shell lines a client needs (eval "$(local_cluster.sh env DIR)"): SLURM_CONF
#            and the loopback Open MPI settings for jobs (loopback_mpi.env)
#
# Needs root (slurmd runs as root) and the apt packages slurm-wlm and munge (scripts/setup.sh).
# Nothing outside DIR is changed, except a short symbolic link in /tmp when DIR's path is too long
# for the Unix sockets Slurm, munge and PMIx create under it (removed by stop).
#
# Why it looks like this (the checked recipe is in LOCAL_SLURM.md of the shared notes):
# - munged is our own, with its own key and socket (AuthInfo=socket=...), so no system service is
#   needed or touched, and two clusters never share credentials.
# - Ports and job ids derive from DIR's path, so two clones (two CI runs) on one host get different
#   ones; a port that is taken anyway moves the cluster to the next block, and start says so.
# - Each slurmd runs in its own mount namespace with a private directory (DIR/nt-NODE) bind-mounted
#   over TmpFS (DIR/nodetmp): two slurmstepd on one host would otherwise both create
#   <TmpFS>/spmix_appdir_<uid>_<job>.<step> and the PMIx step fails with "File exists". It is also
#   each node's own local storage: a job's DIR/nodetmp/x is DIR/nt-NODE/x seen from outside.
# - Jobs run Open MPI through UCX over TCP on lo (tests/slurm/loopback_mpi.env, printed by `env`):
#   ranks on the fake nodes share one host, Open MPI's shared-memory BTL crashes when it is
#   told they are on different nodes, and its TCP BTL crashes a rank at start-up now and then.
set -euo pipefail

readonly NODES=(n1 n2 n3)
readonly CPUS_PER_NODE=2

die() { printf 'local_cluster: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'local_cluster: %s\n' "$*"; }

command=${1:-}
[ -n "$command" ] || die "usage: $0 start|stop|status|env [DIR]"
DIR=${2:-${MNDDP_SLURM_CLUSTER:-$PWD/slurm-cluster}}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
CONF=$DIR/slurm.conf
HASH=$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)

# Unix socket paths are limited to 107 bytes; slurmstepd and PMIx add ~60 to the spool and TmpFS
# paths. A long DIR is reached through a short link instead.
LINK=/tmp/mnddp-slurm-$((HASH % 100000000))
if [ ${#DIR} -le 40 ]; then ROOT=$DIR; else ROOT=$LINK; fi

export SLURM_CONF=$CONF

# pid_alive PIDFILE: the pid in PIDFILE runs and is the process recorded at start (same start time).
pid_alive() {
  local file=$1 pid start
  [ -s "$file" ] || return 1
  pid=$(head -1 "$file")
  [ -d "/proc/$pid" ] || return 1
  # A zombie has exited; nothing may reap it when this runs as a container's only service.
  [ "$(proc_field "$pid" 1)" != Z ] || return 1
  [ -s "$file.start" ] || return 0
  start=$(proc_start_time "$pid") || return 1
  [ "$start" = "$(cat "$file.start")" ]
}

# proc_field PID N: field N+2 of /proc/PID/stat (1: state, 2: parent pid, 20: start time).
proc_field() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the command name may contain spaces and parentheses; the fields after it do not
  local fields
  read -r -a fields <<<"$stat"
  echo "${fields[$(($2 - 1))]}"
}

# The start time of a process in clock ticks since boot (field 22 of /proc/PID/stat): with the pid
# it names one process, so a recycled pid is never mistaken for ours.
proc_start_time() { proc_field "$1" 20; }

# Records the start time beside a pid file written by a daemon.
stamp_pid_file() { proc_start_time "$(head -1 "$1")" >"$1.start"; }

# descendants PID...: every live descendant of these pids, as "pid starttime" lines.
descendants() {
  local -A children=()
  local pid ppid
  for stat in /proc/[0-9]*/stat; do
    pid=${stat#/proc/}
    pid=${pid%/stat}
    ppid=$(proc_field "$pid" 2) || continue
    children[$ppid]+=" $pid"
  done
  local queue=("$@") next
  while ((${#queue[@]})); do
    next=${queue[0]}
    queue=("${queue[@]:1}")
    for pid in ${children[$next]:-}; do
      echo "$pid $(proc_start_time "$pid" || echo gone)"
      queue+=("$pid")
    done
  done
}

daemon_pid_files() { echo "$DIR/munge/munged.pid" "$DIR/slurmctld.pid" "$DIR"/slurmd-*.pid; }

# port_free PORT: nothing listens on it (TCP, any address).
port_free() { [ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }

# Picks four consecutive ports (slurmctld, n1, n2, n3) in 20000-31999 from DIR's hash, moving to the
# next block while one is taken.
choose_ports() {
  local block=$((HASH % 3000)) tries node
  for tries in $(seq 20); do
    BASE_PORT=$((20000 + 4 * block))
    local free=1
    for node in 0 "${!NODES[@]}"; do port_free $((BASE_PORT + node + 1)) || free=0; done
    if [ $free = 1 ] && port_free "$BASE_PORT"; then
      [ "$tries" = 1 ] || say "ports of block $((HASH % 3000)) are taken; using $BASE_PORT-$((BASE_PORT + 3))"
      return
    fi
    block=$(((block + 1) % 3000))
  done
  die "no free port block found near $((20000 + 4 * (HASH % 3000)))"
}

write_conf() {
  local host
  host=$(hostname)
  # Job ids differ between clusters too (Open MPI names session directories in /tmp after them).
  local first_job_id=$((BASE_PORT * 100))
  cat >"$CONF" <<EOF
# Written by tests/slurm/local_cluster.sh for the state directory $DIR; rewritten at each start.
ClusterName=mnddp-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$BASE_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$ROOT/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$ROOT/state
SlurmctldPidFile=$ROOT/slurmctld.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdSpoolDir=$ROOT/spool-%n
SlurmdPidFile=$ROOT/slurmd-%n.pid
SlurmdLogFile=$ROOT/log/slurmd-%n.log
TmpFS=$ROOT/nodetmp
FirstJobId=$first_job_id
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
# A job past its time limit gets SIGTERM and, this many seconds later, SIGKILL.
KillWait=10
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((BASE_PORT + 1)) CPUs=$CPUS_PER_NODE RealMemory=4000 Gres=gpu:2 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((BASE_PORT + 2)) CPUs=$CPUS_PER_NODE RealMemory=4000 Gres=gpu:2 State=UNKNOWN
NodeName=n3 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((BASE_PORT + 3)) CPUs=$CPUS_PER_NODE RealMemory=4000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=resilient Nodes=n1,n2,n3 MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  # Two stand-in "GPUs" per node, so that the batch scripts keep their --gpus-per-node line and the
  # tests see each task's CUDA_VISIBLE_DEVICES. Slurm wants character devices (it only stats them
  # here: no device cgroup): links to /dev/null.
  mkdir -p "$DIR/dev"
  ln -sfn /dev/null "$DIR/dev/gpu0"
  ln -sfn /dev/null "$DIR/dev/gpu1"
  echo "Name=gpu File=$ROOT/dev/gpu[0-1]" >"$DIR/gres.conf"
}

start_munge() {
  mkdir -p "$DIR/munge"
  chmod 700 "$DIR/munge"
  mungekey --create --force --keyfile="$DIR/munge/munge.key" 2>/dev/null ||
    { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=128 count=1 status=none && chmod 600 "$DIR/munge/munge.key"; }
  # --force: munged runs as root here and its key lives outside /etc/munge.
  munged --force --socket="$ROOT/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
    2>>"$DIR/log/munged.log" || die "munged did not start: $(tail -3 "$DIR/log/munged.log")"
  stamp_pid_file "$DIR/munge/munged.pid"
  munge -n --socket="$ROOT/munge/munge.socket" | unmunge --socket="$ROOT/munge/munge.socket" >/dev/null ||
    die "munge does not work: $(tail -3 "$DIR/log/munged.log")"
}

start_slurmd() {
  local node=$1
  mkdir -p "$DIR/nt-$node" "$DIR/spool-$node"
  # slurmd forks into the background and keeps the private mount namespace unshare made for it.
  unshare -m --propagation private bash -c 'mount --bind "$1" "$2" && exec slurmd -f "$3" -N "$4"' \
    _ "$ROOT/nt-$node" "$ROOT/nodetmp" "$CONF" "$node" 2>>"$DIR/log/start.log" ||
    die "slurmd $node did not start: $(tail -3 "$DIR/log/start.log") $(tail -3 "$DIR/log/slurmd-$node.log" 2>/dev/null)"
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds; false after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
  [ "$states" = $'n1 idle\nn2 idle\nn3 idle' ]
}

show_logs() {
  for log in "$DIR"/log/*.log; do
    echo "--- $log"
    tail -8 "$log"
  done >&2
}

cmd_start() {
  for tool in slurmctld slurmd munged unshare ss; do
    command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh (apt: slurm-wlm munge)"
  done
  [ "$(id -u)" = 0 ] || die "the local cluster runs slurmd as root: run as root"
  cmd_stop quiet
  rm -rf "${DIR:?}"/{state,log,dev,gres.conf,spool-*,nt-*,nodetmp,munge,tmp,*.pid,*.pid.start,*.mntns,ports}
  mkdir -p "$DIR"/{state,log,nodetmp,tmp}
  [ "$ROOT" = "$DIR" ] || ln -sfn "$DIR" "$LINK"
  choose_ports
  echo "$BASE_PORT" >"$DIR/ports"
  write_conf
  start_munge
  slurmctld -f "$CONF" -c 2>>"$DIR/log/start.log" || { show_logs; die "slurmctld did not start"; }
  wait_for 10 test -s "$DIR/slurmctld.pid" || { show_logs; die "slurmctld wrote no pid file"; }
  stamp_pid_file "$DIR/slurmctld.pid"
  for node in "${NODES[@]}"; do start_slurmd "$node"; done
  for node in "${NODES[@]}"; do
    wait_for 10 test -s "$DIR/slurmd-$node.pid" || { show_logs; die "slurmd $node wrote no pid file"; }
    stamp_pid_file "$DIR/slurmd-$node.pid"
    readlink "/proc/$(head -1 "$DIR/slurmd-$node.pid")/ns/mnt" >"$DIR/slurmd-$node.mntns"
  done
  if ! wait_for 60 nodes_idle; then
    sinfo -N >&2 || true
    show_logs
    cmd_stop quiet
    die "the nodes did not become idle within 60 s"
  fi
  say "up: $CONF (slurmctld port $BASE_PORT, slurmd $((BASE_PORT + 1))-$((BASE_PORT + ${#NODES[@]})), first job id $((BASE_PORT * 100)))"
}

cmd_stop() {
  local quiet=${1:-}
  local live=() file
  for file in $(daemon_pid_files); do
    if pid_alive "$file"; then live+=("$(head -1 "$file")"); fi
  done
  if ((${#live[@]} == 0)) && [ -z "$(node_processes)" ]; then
    [ -n "$quiet" ] || say "not running ($DIR)"
    [ "$ROOT" = "$DIR" ] || rm -f "$LINK"
    return 0
  fi
  # Jobs first, while Slurm can still end them in order (SIGTERM, then SIGKILL after KillWait).
  if pid_alive "$DIR/slurmctld.pid"; then
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      [ -n "$quiet" ] || say "cancelling jobs $jobs"
      # shellcheck disable=SC2086  # one word per job id
      scancel $jobs 2>/dev/null || true
      wait_for 30 jobs_gone || say "jobs still listed 30 s after scancel: killing their processes"
    fi
  fi
  # Snapshot what the daemons started (slurmscriptd, ...) before they go away: orphans are
  # re-parented and could not be found later.
  local snapshot
  snapshot=$( ((${#live[@]} == 0)) || descendants "${live[@]}")
  if pid_alive "$DIR/slurmctld.pid"; then timeout 10 scontrol shutdown 2>/dev/null || true; fi
  local deadline=$((SECONDS + 15)) any
  while :; do
    any=0
    for file in $(daemon_pid_files); do pid_alive "$file" && any=1; done
    [ $any = 1 ] && [ $SECONDS -lt $deadline ] || break
    # munged is not told by scontrol; stop it once Slurm is down.
    if ! pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/munge/munged.pid"; then
      kill "$(head -1 "$DIR/munge/munged.pid")" 2>/dev/null || true
    fi
    sleep 0.5
  done
  for file in $(daemon_pid_files); do
    if pid_alive "$file"; then
      say "killing $(basename "$file" .pid) (pid $(head -1 "$file")) that did not stop"
      kill -9 "$(head -1 "$file")" 2>/dev/null || true
    fi
  done
  # slurmstepd daemonizes away from slurmd, and its tasks with it; all of them stay in the slurmd's
  # private mount namespace, which nothing else on the host uses.
  local pid start
  for pid in $(node_processes); do
    say "killing leftover process $pid ($(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-80))"
    kill -9 "$pid" 2>/dev/null || true
  done
  while read -r pid start; do
    [ -n "$pid" ] || continue
    if [ "$(proc_start_time "$pid" 2>/dev/null)" = "$start" ]; then
      say "killing leftover process $pid ($(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-80))"
      kill -9 "$pid" 2>/dev/null || true
    fi
  done <<<"$snapshot"
  [ "$ROOT" = "$DIR" ] || rm -f "$LINK"
  # Nothing of the cluster may be left: no daemon naming DIR, no process in the nodes' namespaces.
  local left
  wait_for 5 nothing_left || true
  left="$(daemons_of_dir)$(node_processes)"
  [ -z "$left" ] || die "still running after stop: $left"
  [ -n "$quiet" ] || say "stopped ($DIR)"
}

jobs_gone() { [ -z "$(squeue -h -o %i 2>/dev/null)" ]; }
nothing_left() { [ -z "$(daemons_of_dir)$(node_processes)" ]; }

# node_processes: live processes in the private mount namespace of either slurmd (recorded at
# start): slurmd, its slurmstepd and every job process on the fake nodes. A recorded namespace may
# be gone and its inode number given to a new namespace (any `unshare -m` on the host: the
# device-check dry run, the full-disk tests), so a match must also show the node's own bind mount
# of nt-NODE over DIR/nodetmp: without that check `stop` killed unrelated processes now and then.
node_processes() {
  local ns_file mine namespaces=() link pid
  mine=$(readlink /proc/self/ns/mnt)
  for ns_file in "$DIR"/slurmd-*.mntns; do
    [ -s "$ns_file" ] || continue
    # Never this shell's own namespace (should unshare ever have failed to make a new one).
    [ "$(cat "$ns_file")" = "$mine" ] || namespaces+=("$(cat "$ns_file")")
  done
  ((${#namespaces[@]})) || return 0
  for link in /proc/[0-9]*/ns/mnt; do
    pid=${link#/proc/}
    pid=${pid%/ns/mnt}
    local ns
    ns=$(readlink "$link" 2>/dev/null) || continue  # gone, or a zombie
    for want in "${namespaces[@]}"; do
      if [ "$ns" = "$want" ] && is_node_mount_namespace "$pid"; then
        printf '%s ' "$pid"
        break
      fi
    done
  done
}

# is_node_mount_namespace PID: PID's mounts include a fake node's TmpFS (DIR/nt-NODE on DIR/nodetmp).
is_node_mount_namespace() {
  awk -v target="$DIR/nodetmp" '$5 == target && $4 ~ /\/nt-n[0-9]+$/ {found = 1} END {exit !found}' \
    "/proc/$1/mountinfo" 2>/dev/null
}

# daemons_of_dir: "pid name" of munged/slurmctld/slurmd processes whose command line names DIR.
daemons_of_dir() {
  local cmdline pid
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}
    pid=${pid%/cmdline}
    case $(tr '\0' ' ' 2>/dev/null <"$cmdline") in
      munged*"$DIR"* | munged*"$ROOT/"* | slurm*"$DIR"* | slurm*"$ROOT/"*)
        [ "$(proc_field "$pid" 1)" = Z ] || printf '%s %s; ' "$pid" "$(cut -d' ' -f1 2>/dev/null <"/proc/$pid/comm")" ;;
    esac
  done
}

cmd_status() {
  local ok=0 file name
  local files=("$DIR/munge/munged.pid" "$DIR/slurmctld.pid")
  for name in "${NODES[@]}"; do files+=("$DIR/slurmd-$name.pid"); done
  for file in "${files[@]}"; do
    name=$(basename "$file" .pid)
    if pid_alive "$file"; then say "$name running (pid $(head -1 "$file"))"; else say "$name not running"; ok=1; fi
  done
  if [ $ok = 0 ]; then
    sinfo -N || ok=1
    nodes_idle || [ -n "$(squeue -h 2>/dev/null)" ] || ok=1
  fi
  return $ok
}

cmd_env() {
  echo "export SLURM_CONF='$CONF'"
  grep -v '^#' "$(dirname "${BASH_SOURCE[0]}")/loopback_mpi.env"
}

case $command in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) die "unknown command '$command' (start, stop, status or env)" ;;
esac
