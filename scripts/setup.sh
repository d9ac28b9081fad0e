#!/usr/bin/env bash
# Installs everything mnddp needs on a Debian 12 machine: the apt packages (Open MPI, parallel
# HDF5, Boost.Program_options, spdlog, fmt, nlohmann-json, GoogleTest, xxHash, ccache, ninja; Slurm, munge
# and strace for the slurm tests) and the project venv with torch (LibTorch), numpy and h5py.
# Idempotent: a second run checks and returns. Installing Slurm starts no daemon (the tests run
# their own cluster under the build tree: tests/slurm/local_cluster.sh).
set -euo pipefail
source "$(dirname "$0")/common.sh"

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev zlib1g-dev libxxhash-dev libgoogle-perftools-dev python3-venv clang-format git
  slurm-wlm munge strace
  time # GNU time: bench/compare.sh's peak RSS
  help2man lmod # the installed tree: man pages from --help, and its module file tested with Lmod
  libprotobuf-dev protobuf-compiler # --tensorboard: TensorBoard's event schema
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing apt packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv is current when its stamp matches requirements.txt.
requirements="$MNDDP_ROOT/scripts/requirements.txt"
stamp="$MNDDP_VENV/.mnddp-requirements"
if [ ! -x "$MNDDP_VENV/bin/python" ] || ! cmp -s "$requirements" "$stamp"; then
  say "creating the venv in $MNDDP_VENV (torch is a large download)"
  python3 -m venv "$MNDDP_VENV"
  "$MNDDP_VENV/bin/pip" install -q --upgrade pip
  "$MNDDP_VENV/bin/pip" install -q -r "$requirements"
  cp "$requirements" "$stamp"
fi
say "setup complete: torch $("$MNDDP_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))') in $MNDDP_VENV"
