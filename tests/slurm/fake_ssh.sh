#!/usr/bin/env bash
# A stand-in for ssh in Open MPI's rsh launcher (--mca plm_rsh_agent): runs the remote command on
# this host in a clean environment (HOME and a system PATH), as sshd would start it on another node,
# and records each call in $FAKE_SSH_LOG. Usage (by mpirun): fake_ssh.sh [ssh options] HOST COMMAND...
set -euo pipefail
log=${FAKE_SSH_LOG:-/dev/null}
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    -o | -p | -l | -i | -F | -E) shift 2 ;;  # options with a value
    *) shift ;;
  esac
done
host=$1
shift
printf '%s %s\n' "$host" "$*" >>"$log"
# Its own hostname too (a private UTS namespace): Open MPI tells nodes apart by their host names, and
# ranks that disagree on which peers share their node crash in MPI_Comm_split_type.
exec unshare --uts env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin FAKE_HOST="$host" \
  bash -c 'hostname "$FAKE_HOST" && exec bash -c "$1"' _ "$*"
