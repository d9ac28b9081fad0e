#!/usr/bin/env bash
# The Debian packages the GPU machine lacks (Open MPI, parallel HDF5, Boost.Program_options, spdlog,
# fmt, nlohmann-json, GoogleTest, protobuf and protoc, with every runtime library they and mnddp's
# binaries load), fetched on this machine into device-deps/debs for the device tool's `carry`
# (../shared/device/README.md).
#
# Usage: scripts/device_bundle.sh [--dry-run] [--build DIR]
#   (no flag)  download the packages (apt-get download) into device-deps/debs, stage DIR's binaries,
#              stripped, in device-deps/prebuilt (the device check's fallback), print the total size;
#              exit 1 when it exceeds the 64 MiB a device call may carry
#   --dry-run  also unpack the bundle into a scratch prefix and prove it complete, as the device
#              would see it: every shared library of the build (DIR, default build/: mnddp,
#              mnddp-data, the tests, the benchmarks) and of Open MPI's plugins and programs must
#              resolve, with `ldd` under a clean environment, from that prefix, torch's own
#              libraries or the C/C++ runtime alone; then the unpacked Open MPI runs a two-rank
#              program with the system's copy hidden (a private mount namespace)
#
# The package list is derived, not written down: the owners (dpkg -S) of every library `ldd` finds
# for the binaries above and Open MPI's components, plus the -dev packages needed to build mnddp
# there, minus the C/C++ runtime every Linux machine has (libc6, libstdc++6, libgcc-s1).
set -euo pipefail
source "$(dirname "$0")/common.sh"

readonly LIMIT_MIB=64
# What the device has (or must not take from us: a second libc would not match its loader).
readonly BASE_PACKAGES="libc6 libstdc++6 libgcc-s1 gcc-12-base libcrypt1"
readonly DEV_PACKAGES="libopenmpi-dev openmpi-bin openmpi-common libhdf5-openmpi-dev libhdf5-dev
  libboost1.74-dev libboost-program-options1.74-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev googletest zlib1g-dev libxxhash-dev libxxhash0 libgoogle-perftools-dev libaec-dev libsz2 libssl-dev libcurl4-openssl-dev
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32"

dry_run=0
build_dir=$MNDDP_BUILD_DIR
while (($#)); do
  case $1 in
    --dry-run) dry_run=1 ;;
    --build) build_dir=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

bundle=$MNDDP_ROOT/device-deps
debs=$bundle/debs
mkdir -p "$debs"

# --- what to carry ------------------------------------------------------------------------------
ompi_libdir=/usr/lib/x86_64-linux-gnu/openmpi/lib
[ -d "$ompi_libdir" ] || die "Open MPI is not installed here ($ompi_libdir): run scripts/setup.sh"
[ -x "$build_dir/mnddp" ] || die "no build in $build_dir: run scripts/test.sh (or pass --build DIR)"

# binaries: what the device runs (ours) and what Open MPI loads or starts.
binaries() {
  find "$build_dir" -maxdepth 2 -type f -perm -u+x \( -name 'mnddp*' -o -name 'test_*' -o -name 'check_*' \) \
    ! -name '*.sh' ! -name '*.py'
  find "$ompi_libdir" /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/ucx -name '*.so*' -type f 2>/dev/null
  for program in orterun orted ompi_info opal_wrapper; do command -v "$program" || true; done
}

# owners FILE...: the Debian packages owning each library a file loads (resolved here), once each.
owners() {
  local file lib
  for file in "$@"; do
    ldd "$file" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
  done | sort -u | while read -r lib; do
    dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
  done | cut -d: -f1 | sort -u
}

mapfile -t files < <(binaries)
packages=$( (owners "${files[@]}"; printf '%s\n' $DEV_PACKAGES) | sort -u)
for base in $BASE_PACKAGES; do packages=$(grep -vx "$base" <<<"$packages" || true); done

# --- download -----------------------------------------------------------------------------------
say "bundle: $(wc -l <<<"$packages") packages into $debs"
(
  cd "$debs"
  missing=()
  for pkg in $packages; do
    compgen -G "${pkg}_*.deb" >/dev/null || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    apt-get download -qq "${missing[@]}" 2>&1 | grep -v '^W:' || true
    for pkg in "${missing[@]}"; do compgen -G "${pkg}_*.deb" >/dev/null || die "apt-get download $pkg failed"; done
  fi
  # Packages no longer wanted (an older list) would be carried for nothing.
  for deb in *.deb; do
    grep -qx "${deb%%_*}" <<<"$packages" || { say "dropping $deb (no longer needed)"; rm -f "$deb"; }
  done
)
# Way (b) of the device README, the fallback when the build there fails: this build's binaries,
# stripped (torch and the carried packages are shared libraries, so they are small).
prebuilt=$bundle/prebuilt
rm -rf "$prebuilt"
mkdir -p "$prebuilt/tests" "$prebuilt/bench"
for binary in mnddp mnddp-data tests/test_gpu tests/test_nccl_pair bench/libmnddp_host_waits.so; do
  [ -e "$build_dir/$binary" ] || die "no $build_dir/$binary to carry as the fallback: build first"
  strip -o "$prebuilt/$binary" "$build_dir/$binary"
done
bytes=$(du -cb "$debs"/*.deb "$prebuilt"/mnddp* "$prebuilt"/*/* | tail -1 | cut -f1)
say "bundle: $(ls "$debs"/*.deb | wc -l) .deb files and the prebuilt fallback, $((bytes / 1048576)) MiB (limit $LIMIT_MIB MiB)"
printf '%s\n' $packages >"$bundle/packages.txt"
((bytes <= LIMIT_MIB * 1048576)) || die "the bundle is $((bytes / 1048576)) MiB: over the $LIMIT_MIB MiB a device call carries"
((dry_run)) || exit 0

# --- dry run: unpack and prove ------------------------------------------------------------------
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-device-dry.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/deps
bash "$MNDDP_ROOT/scripts/device_env.sh" unpack "$debs" "$prefix" >/dev/null
torch_lib=$("$MNDDP_VENV/bin/python" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
nvidia_libs=$(find "$(dirname "$torch_lib")/../nvidia" -maxdepth 2 -name lib -type d 2>/dev/null | tr '\n' ':')
eval "$(bash "$MNDDP_ROOT/scripts/device_env.sh" env "$prefix")"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_lib:$nvidia_libs"

# Every library must come from the prefix, torch's wheels or the C/C++ runtime the device has.
allowed_base='/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libcrypt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
problems=0
checked=0
check_file() {
  local file=$1 line lib path
  while read -r line; do
    lib=$(awk '{print $1}' <<<"$line")
    path=$(awk '$2 == "=>" {print $3}' <<<"$line")
    [ -n "$path" ] && path=$(readlink -f "$path")
    if [[ $line == *"not found"* ]]; then
      echo "  $file: $lib not found" >&2
      problems=$((problems + 1))
    elif [[ -n $path && $path != "$prefix"/* && $path != "$torch_lib"/* && $path != */site-packages/nvidia/* &&
      ! $path =~ $allowed_base && $path != /usr/local/cuda* ]]; then
      echo "  $file: $lib resolves outside the bundle: $path" >&2
      problems=$((problems + 1))
    fi
  done < <(env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$file" 2>&1 | grep '=>')
  checked=$((checked + 1))
}
for file in "$build_dir"/mnddp "$build_dir"/mnddp-data "$build_dir"/tests/test_* "$build_dir"/bench/mnddp-bench-*; do
  [ -x "$file" ] && check_file "$file"
done
# Open MPI's own plugins and programs, from the prefix (the optional ones whose libraries no
# machine here has, such as the InfiniBand PSM ones, are skipped by Open MPI when they fail to load).
while read -r file; do check_file "$file"; done < <(find "$prefix/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" \
  -name 'mca_*.so' ! -name '*psm*' ! -name '*ofi*' ! -name '*usnic*' ! -name '*openib*' ! -name '*verbs*' -type f)
for program in orterun orted; do check_file "$prefix/usr/bin/$program"; done
((problems == 0)) || die "dry run: $problems libraries do not resolve from the bundle ($checked files checked)"
say "dry run: $checked binaries and plugins resolve from the bundle, torch and the C/C++ runtime alone"

# The unpacked Open MPI runs with the system's copy hidden, as on the device.
cat >"$scratch/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int provided, rank, size, sum;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("relocated Open MPI: %d ranks, sum %d, thread level %d\n", size, sum, provided);
  MPI_Finalize();
  return sum == size * (size - 1) / 2 && provided == MPI_THREAD_MULTIPLE ? 0 : 1;
}
EOF
mnddp_mpi_env
hidden=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi)
result=$(unshare -m --propagation private bash -c '
  set -e
  empty=$(mktemp -d)
  for d in "${@:2}"; do [ -d "$d" ] && mount --bind "$empty" "$d"; done
  cd "$1"
  mpicc -o hello hello.c
  mpirun -np 2 --oversubscribe ./hello' _ "$scratch" "${hidden[@]}" 2>&1) ||
  die "dry run: the relocated Open MPI failed with the system copy hidden:"$'\n'"$result"
say "dry run: $(tail -1 <<<"$result") (system Open MPI hidden)"
