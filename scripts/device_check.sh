#!/usr/bin/env bash
# The GPU check, in one call on the lent H200 machine (../shared/device/README.md): versions, the
# carried Debian packages unpacked into a prefix, mnddp built for sm_90 against the device's own
# torch, `ctest -L gpu` with NCCL_CHECK_POINTERS=1, and the GPU benchmark against PyTorch eager.
# Logs go under $OUT; the last lines are a short result table (the device tool returns the tail).
#
# Usage (from the repository root):
#   scripts/device_check.sh             on the device; carry device-deps (scripts/device_bundle.sh)
#   scripts/device_check.sh --dry-run   here, without a GPU: the same steps up to the build (a
#                                       configure only, with the system's packages hidden), no GPU step
# Budget: under 8 minutes on 16 cores, so a second try fits in the 15 the device gives.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dry_run=0
[ "${1:-}" = --dry-run ] && dry_run=1
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
started=$SECONDS
rows=()
status=0

log() { printf '[device_check %3ds] %s\n' $((SECONDS - started)) "$*"; }
# row NAME RESULT DETAIL: one line of the final table.
row() { rows+=("$(printf '%-22s %-6s %s' "$1" "$2" "$3")"); }
table() {
  echo
  echo "== mnddp device check ($( ((dry_run)) && echo dry run || echo H200)), $((SECONDS - started)) s, logs in $OUT"
  printf '%s\n' "${rows[@]}"
}
scratch=""
# The dry run's prefix (~280 MB of unpacked packages) goes with it.
finish() {
  table
  if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}
trap finish EXIT

# 1. What the machine is.
if ((dry_run)); then
  python=$root/.venv/bin/python
  row gpu skip "dry run: no GPU steps"
else
  python=$(command -v python3)
  nvidia-smi -L | tee "$OUT/nvidia-smi.txt"
  row gpu ok "$(head -1 "$OUT/nvidia-smi.txt" | cut -c1-60)"
fi
versions=$("$python" - <<'PY'
import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "n/a (no GPU)"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}")
PY
)
log "$versions"
row versions ok "$versions"

# 2. The carried packages, unpacked into a prefix (never into /).
prefix=${MNDDP_DEVICE_PREFIX:-/opt/deps}
if ((dry_run)); then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-device-check.XXXXXX")
  prefix=$scratch/deps
fi
if ! bash scripts/device_env.sh unpack device-deps/debs "$prefix" >"$OUT/unpack.log" 2>&1; then
  row unpack FAIL "$(tail -1 "$OUT/unpack.log")"
  exit 1
fi
eval "$(bash scripts/device_env.sh env "$prefix")"
row unpack ok "$(tail -1 "$OUT/unpack.log")"

# 3. Build (a): against the device's torch, for sm_90. The dry run configures only, inside a mount
# namespace where this machine's copies of the carried packages are hidden, as on the device.
build=${MNDDP_DEVICE_BUILD_DIR:-$root/build-device}
cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMNDDP_PYTHON="$python"
  -DCMAKE_CUDA_ARCHITECTURES=90 -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpiexec"
  -DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx"
  -DHDF5_C_COMPILER_EXECUTABLE="$prefix/usr/bin/h5pcc" -DMNDDP_CCACHE=OFF)
export TORCH_CUDA_ARCH_LIST=9.0
built=0
if ((dry_run)); then
  hide=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi
    /usr/include/hdf5 /usr/lib/x86_64-linux-gnu/hdf5 /usr/include/boost /usr/include/spdlog /usr/include/fmt
    /usr/include/nlohmann /usr/include/gtest /usr/include/gmock /usr/include/google)
  rm -rf "$build"
  # cmake's arguments travel quoted in one variable; inside, the directories above are emptied and
  # the libraries and CMake packages of the carried packages replaced by nothing.
  if MNDDP_DEVICE_CMAKE_ARGS="$(printf '%q ' "${cmake_args[@]}")" unshare -m --propagation private bash -c '
      empty=$(mktemp -d)
      for d in "$@"; do [ -d "$d" ] && mount --bind "$empty" "$d"; done
      for f in /usr/lib/x86_64-linux-gnu/cmake/* /usr/lib/x86_64-linux-gnu/lib{boost,spdlog,fmt,hdf5,mpi,gtest,crypto,ssl,curl,sz,aec,proto}* /usr/bin/protoc*; do
        case $f in
          */cmake/Boost* | */cmake/boost_* | */cmake/spdlog | */cmake/fmt | */cmake/GTest | */cmake/nlohmann_json | */cmake/hdf5*)
            mount --bind "$empty" "$f" ;;
          */cmake/*) ;;
          *) [ -e "$f" ] && mount --bind /dev/null "$f" ;;
        esac
      done
      eval "cmake $MNDDP_DEVICE_CMAKE_ARGS"
      status=$?
      echo "cmake exit status: $status"
      exit $status' _ "${hide[@]}" >"$OUT/configure.log" 2>&1; then
    row configure ok "$(grep -m1 'mnddp 0' "$OUT/configure.log" | sed 's/^-- //' | cut -c1-110)"
  else
    row configure FAIL "see $OUT/configure.log: $(grep -m1 -iE "error|could not|not found" "$OUT/configure.log" | cut -c1-80)"
    status=1
  fi
else
  t=$SECONDS
  if cmake "${cmake_args[@]}" >"$OUT/configure.log" 2>&1 &&
    cmake --build "$build" -j 16 --target mnddp mnddp-data test_gpu mnddp-bench-ddp >"$OUT/build.log" 2>&1; then
    built=1
    row build ok "$((SECONDS - t)) s, sm_90, against the device's torch"
  else
    row build FAIL "$((SECONDS - t)) s: $(grep -m1 -E 'error|Error' "$OUT/configure.log" "$OUT/build.log" | cut -c1-90)"
  fi
fi
((dry_run)) && exit "$status"

# Build (b), the fallback: the binaries built on the CPU machine against the same torch release.
if ((!built)); then
  if [ -x device-deps/prebuilt/mnddp ]; then
    build=$root/device-deps/prebuilt
    # Their RUNPATH names the CPU machine's venv: point them at the device's torch and its CUDA wheels.
    wheels=$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
    libs="$wheels/torch/lib:$(find "$wheels/nvidia" -maxdepth 2 -name lib -type d 2>/dev/null | tr '\n' ':')"
    export LD_LIBRARY_PATH="$libs$LD_LIBRARY_PATH"
    row fallback ok "carried binaries from device-deps/prebuilt"
  else
    row fallback FAIL "no device-deps/prebuilt to fall back to"
    exit 1
  fi
fi

# 4. The GPU tests: NCCL refuses a host pointer under NCCL_CHECK_POINTERS=1.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_CHECK_POINTERS=1
if [ -f "$build/CTestTestfile.cmake" ]; then
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 240) >"$OUT/ctest-gpu.log" 2>&1
  rc=$?
else
  OMPI_MCA_rmaps_base_oversubscribe=1 timeout 240 "$prefix/usr/bin/mpiexec" -np 2 "$build/tests/test_gpu" \
    --expect-ranks=2 >"$OUT/ctest-gpu.log" 2>&1
  rc=$?
fi
passed=$(grep -c '\[       OK \]' "$OUT/ctest-gpu.log")
failed=$(grep -c '\[  FAILED  \] [A-Z]' "$OUT/ctest-gpu.log")
skipped=$(grep -c '\[  SKIPPED \] [A-Z]' "$OUT/ctest-gpu.log")
row gpu-tests "$([ "$rc" = 0 ] && echo ok || echo FAIL)" "$passed ok, $failed failed, $skipped skipped (rc $rc)"
[ "$rc" = 0 ] || status=1

# 5. The GPU benchmark: mnddp (1 rank, NCCL) against PyTorch eager, alternating.
if MNDDP_BUILD_DIR=$build MNDDP_PYTHON=$python timeout 300 bash bench/run_gpu_bench.sh "$OUT" >"$OUT/bench.log" 2>&1; then
  while read -r line; do row bench ok "$line"; done < <(grep '^ratio' "$OUT/bench.log")
else
  row bench FAIL "see $OUT/bench.log: $(tail -1 "$OUT/bench.log" | cut -c1-80)"
  status=1
fi
exit "$status"
