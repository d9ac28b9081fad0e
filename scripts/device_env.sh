#!/usr/bin/env bash
# Debian packages unpacked into a prefix (not /), and the environment that makes them work there:
# the GPU machine's way to get Open MPI, parallel HDF5, Boost and spdlog (../shared/device/README.md).
#
# Usage: scripts/device_env.sh unpack DEBS_DIR PREFIX   dpkg -x every .deb into PREFIX, then the fix-ups
#        scripts/device_env.sh env PREFIX               print the export lines (eval "$(... env PREFIX)")
#
# The fix-ups are what dpkg's maintainer scripts and update-alternatives would do: the plain command
# names (mpirun, mpicc, h5pcc, ...), and the HDF5 compiler wrapper's hard-coded /usr. Open MPI finds
# itself through OPAL_PREFIX, its PMIx and UCX plugins through their component paths.
set -euo pipefail

die() { printf 'device_env: error: %s\n' "$*" >&2; exit 2; }

command=${1:-}
case $command in
  unpack)
    [ $# = 3 ] || die "usage: $0 unpack DEBS_DIR PREFIX"
    debs=$2
    prefix=$3
    compgen -G "$debs/*.deb" >/dev/null || die "no .deb files in '$debs' (run scripts/device_bundle.sh)"
    mkdir -p "$prefix"
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
    usr=$prefix/usr
    # update-alternatives, by hand: the names CMake and users look for.
    for name in mpirun mpiexec mpicc mpicxx mpic++ mpiCC; do
      [ -e "$usr/bin/$name.openmpi" ] && ln -sfn "$name.openmpi" "$usr/bin/$name"
    done
    for name in h5pcc h5pfc; do
      [ -e "$usr/bin/$name.openmpi" ] && ln -sfn "$name.openmpi" "$usr/bin/$name"
    done
    # The HDF5 wrapper script names its install prefix literally.
    for script in "$usr"/bin/h5pcc.openmpi "$usr"/bin/h5pfc.openmpi; do
      [ -f "$script" ] && sed -i "s#\"/usr#\"$usr#g; s#=/usr/#=$usr/#g" "$script"
    done
    echo "unpacked $(ls "$debs"/*.deb | wc -l) packages into $prefix"
    ;;
  env)
    [ $# = 2 ] || die "usage: $0 env PREFIX"
    root=$(cd "$2" && pwd)
    usr=$root/usr
    [ -d "$usr" ] || die "'$2' holds no unpacked packages (run: $0 unpack DEBS PREFIX)"
    multiarch=$usr/lib/x86_64-linux-gnu
    # Some packages (zlib1g, libnl) still ship their libraries in /lib, not /usr/lib.
    cat <<EOF
export PATH='$usr/bin':"\${PATH:-/usr/bin:/bin}"
export LD_LIBRARY_PATH='$multiarch:$root/lib/x86_64-linux-gnu:$multiarch/openmpi/lib:$multiarch/hdf5/openmpi:$multiarch/pmix2/lib':"\${LD_LIBRARY_PATH:-}"
export OPAL_PREFIX='$usr'
export PMIX_MCA_mca_base_component_path='$multiarch/pmix2/lib/pmix'
export UCX_MODULE_DIR='$multiarch/ucx'
export CMAKE_PREFIX_PATH='$usr:$multiarch/cmake':"\${CMAKE_PREFIX_PATH:-}"
export CPATH='$usr/include':"\${CPATH:-}"
export HDF5_ROOT='$multiarch/hdf5/openmpi'
EOF
    ;;
  *) die "usage: $0 unpack DEBS_DIR PREFIX | env PREFIX" ;;
esac
