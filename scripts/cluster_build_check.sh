#!/usr/bin/env bash
# docs/INSTALL.md's "On a cluster" build, done as a cluster user does it, and checked: an
# unprivileged user, no apt-get and no sudo, the dependencies in a prefix (Debian's packages unpacked
# there, as scripts/device_bundle.sh gathers them, standing in for a site's modules: one Lmod module
# file, "deps", sets their environment), the system's own copies of those packages and the CUDA
# toolkit hidden (a private mount namespace whites them out of /usr). The user configures, builds
# and installs mnddp into a prefix, moves the prefix, and from an empty directory with a clean
# environment runs `module load mnddp` (which loads "deps" through MNDDP_MODULE_DEPENDS), writes
# the demo data and trains 2 ranks.
#
# Usage (as root, which only makes the user and the mount namespace): scripts/cluster_build_check.sh
#   MNDDP_CLUSTER_CHECK_DIR  where it works (default /tmp/mnddp-cluster-check, emptied first)
#   MNDDP_CLUSTER_CCACHE     the user's compiler cache, kept between runs (default
#                            /var/cache/mnddp-cluster-check; a fresh one makes the build ~15 min)
# Exit 0 when the user's training run printed its final validation accuracy.
set -euo pipefail
source "$(dirname "$0")/common.sh"

readonly BUILD_USER=mnddp-user
W=${MNDDP_CLUSTER_CHECK_DIR:-/tmp/mnddp-cluster-check}
CCACHE=${MNDDP_CLUSTER_CCACHE:-/var/cache/mnddp-cluster-check}
# The packages a site's modules provide (their system copies are hidden): MPI, parallel HDF5,
# Boost, spdlog, fmt, nlohmann-json, xxHash, protobuf, tcmalloc, GoogleTest, zlib's headers.
readonly HIDE_PATTERN='openmpi|hdf5|boost.*program.options|boost1.74-dev|spdlog|libfmt|xxhash|protobuf|protoc|gtest|googletest|perftools|tcmalloc|nlohmann|libaec-dev|zlib1g-dev'

# --- the user's part: what docs/INSTALL.md tells a cluster user to type ------------------------
if [ "${1:-}" = --as-user ]; then
  cd "$W"
  say "as $(id -un): unpacking the dependency prefix (a site's modules) into $W/deps"
  bash src/scripts/device_env.sh unpack debs deps >/dev/null
  # The site's module for them: device_env.sh's environment as an Lmod file.
  mkdir -p modules/deps
  bash src/scripts/device_env.sh env deps | sed -E \
    -e "s/^export ([A-Za-z0-9_]+)='([^']*)':.*$/prepend_path{\"\1\", \"\2\", delim=\":\"}/" \
    -e "s/^export ([A-Za-z0-9_]+)='([^']*)'$/setenv(\"\1\", \"\2\")/" >modules/deps/1.0.lua
  # The site's Python with torch: the system Python, with the torch of this project's venv on its
  # path (a venv of the user's own would download torch again).
  python3 -m venv torch-env
  torch_env_site=$(torch-env/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$TORCH_SITE" >"$torch_env_site/site-torch.pth"
  source /usr/share/lmod/lmod/init/bash
  module use "$W/modules"
  module load deps
  say "configure (CMake names any missing package in one line)"
  cmake -S src -B build -G Ninja -DMNDDP_PYTHON="$W/torch-env/bin/python" -DCMAKE_INSTALL_PREFIX="$W/prefix" \
    -DMNDDP_MODULE_DEPENDS=deps -DMNDDP_BUILD_TESTS=OFF -DMNDDP_BUILD_BENCH=OFF >configure.log
  grep -E '^-- mnddp' configure.log
  say "build and install"
  cmake --build build >build.log
  cmake --install build >install.log
  mv prefix moved
  mkdir -p empty
  say "from an empty directory, a clean environment: module load mnddp, train 2 ranks"
  env -i HOME="$W/empty" PATH=/usr/bin:/bin W="$W" bash -c '
    set -euo pipefail
    cd "$W/empty"
    source /usr/share/lmod/lmod/init/bash
    module use "$W/modules" "$W/moved/share/modulefiles"
    module load mnddp
    loaded=$(module list 2>&1)
    [[ $loaded == *deps/1.0* ]] || { echo "module load mnddp did not load deps: $loaded" >&2; exit 1; }
    mnddp version
    [ ! -e /usr/local/cuda/lib64 ] || { echo "the CUDA toolkit is visible" >&2; exit 1; }
    for f in /usr/lib/x86_64-linux-gnu/libmpi.so* /usr/bin/mpicc /usr/include/hdf5/openmpi/hdf5.h; do
      [ ! -e "$f" ] && [ ! -L "$f" ] || { echo "the system copy $f is visible" >&2; exit 1; }
    done
    mnddp-data synth --out data/demo --train-samples 2048 --val-samples 512 --shards 2 --shape 1,28,28 \
      --classes 10 --noise 8 --seed 1234 >/dev/null
    OMP_NUM_THREADS=1 timeout 300 mpirun -np 2 --oversubscribe mnddp train \
      --config "$MNDDP_ROOT/share/mnddp/configs/demo.ini" --epochs 1 --threads 1 --metrics-file ""' |
    tee train.log
  grep -q "final validation accuracy" train.log
  exit
fi

# --- root's part: the user, the work directory, the hidden system copies ---------------------
[ "$(id -u)" = 0 ] || die "run as root: it creates the user $BUILD_USER and a private mount namespace"
[ -r /usr/share/lmod/lmod/init/bash ] || die "Lmod is not installed: run scripts/setup.sh"
torch_site=$(compgen -G "$MNDDP_VENV/lib/python3*/site-packages" | head -1)
[ -n "$torch_site" ] && [ -d "$torch_site/torch" ] || die "no torch in $MNDDP_VENV: run scripts/setup.sh"
if ! compgen -G "$MNDDP_ROOT/device-deps/debs/*.deb" >/dev/null; then
  say "gathering the dependency packages (scripts/device_bundle.sh)"
  bash "$MNDDP_ROOT/scripts/device_bundle.sh" >/dev/null
fi
id "$BUILD_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$BUILD_USER"
rm -rf "$W"
mkdir -p "$W/src" "$W/debs" "$CCACHE"
# The source as it is here, committed or not (no build trees, no venv: what git does not ignore).
(cd "$MNDDP_ROOT" && git ls-files -z --cached --others --exclude-standard --deduplicate |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | xargs -0 -r cp -P --parents -t "$W/src")
cp "$MNDDP_ROOT"/device-deps/debs/*.deb "$W/debs/"
chown -R "$BUILD_USER:" "$W" "$CCACHE"

# Whiteouts (0/0 character devices in an overlay's upper directory) for every file of the packages
# the prefix provides: inside the namespace /usr has no trace of them.
upper=$W/.overlay/upper
mkdir -p "$upper" "$W/.overlay/work"
packages=$(dpkg-query -W -f='${Package}\n' | grep -E "$HIDE_PATTERN" || true)
hidden=$(wc -w <<<"$packages")
# shellcheck disable=SC2086
dpkg -L $packages 2>/dev/null | python3 -c '
import os, sys
upper = sys.argv[1]
hidden = {p for p in sys.stdin.read().split("\n")
          if p.startswith("/usr/") and (os.path.isfile(p) or os.path.islink(p))}
# The links update-alternatives made (mpicc, libmpi.so, ...) belong to no package: hidden with their targets.
for top in ("/usr/bin", "/usr/include", "/usr/lib/x86_64-linux-gnu"):
    for name in os.listdir(top):
        link = os.path.join(top, name)
        if os.path.islink(link) and os.path.realpath(link) in hidden:
            hidden.add(link)
for path in hidden:
    target = upper + path[len("/usr"):]
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not os.path.lexists(target):
        os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))  # a character device 0/0: a whiteout
' "$upper"
say "hiding $hidden system packages and the CUDA toolkit; building as $BUILD_USER in $W"
unshare -m --propagation private bash -c '
  set -e
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$1/.overlay/upper,workdir=$1/.overlay/work" /usr
  empty=$(mktemp -d) && chmod 755 "$empty"
  for d in /usr/local/cuda*; do [ -d "$d" ] && mount --bind "$empty" "$(readlink -f "$d")"; done
  exec runuser -u "$2" -- env -i HOME="$1" PATH=/usr/bin:/bin W="$1" TORCH_SITE="$3" \
    CCACHE_DIR="$4" bash "$1/src/scripts/cluster_build_check.sh" --as-user' \
  _ "$W" "$BUILD_USER" "$torch_site" "$CCACHE"
say "cluster build check passed"
