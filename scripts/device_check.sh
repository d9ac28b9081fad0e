#!/usr/bin/env bash
# The GPU check, in one call of at most 8 minutes on the lent H200 machine (../shared/device/README.md,
# docs/GPU_RESULTS.md). Stages, in order of what they prove; each writes its log and appends its result
# row to $OUT/results.txt as soon as it ends, so a call cut short still returns what ran:
#   versions     nvidia-smi, torch, CUDA, NCCL
#   unpack       the carried Debian packages into a prefix (Open MPI, parallel HDF5, Boost, spdlog, ...)
#   build        mnddp for sm_90 against the device's torch (incremental on a rerun)
#   gpu-tests    ctest -L gpu but the pair test; a skipped test is a failure here
#   identity     one libnccl and one libcudart mapped by a running rank, torch's; "gradients over nccl"
#   nccl-pair    two ranks, one GPU (each its own NCCL_HOSTID), every primitive with rank-specific data,
#                SyncBatchNorm, ZeRO, abort (tests/gpu/test_nccl_pair.cpp); if NCCL refuses the trick,
#                one line says so and the rest runs without the two-rank NCCL cases
#   equivalence  2-rank training, NCCL against MPI, per-step losses under --deterministic, 8 settings
#   failures     a stopped, a killed and a stalled rank: exit 4 within --collective-timeout + 30 s,
#                no SIGSEGV, an incident record from every live rank
#   plan         mnddp plan of ResNet-18 on the GPU, then a 1-rank run with --plan: the predicted step
#                and memory (the allocator's peak) within 20% of what the run measured
#   bench        mnddp against PyTorch eager (1 rank) and torchrun DDP (2 ranks), bf16, ConvNet,
#                ResNet-18, GPT-small: samples/s, ratio, peak memory, host waits per step
#
# Usage (from the repository root):
#   scripts/device_check.sh [--stages a,b,...]  on the device; carry device-deps (scripts/device_bundle.sh)
#   scripts/device_check.sh --dry-run           here, without a GPU (ctest -L device): the configure with
#                                               the system's packages hidden, then every later stage's
#                                               plumbing on the CPU build ($MNDDP_BUILD_DIR)
# A stage starts only while the budget (MNDDP_DEVICE_BUDGET, 470 s) leaves room for it; the rest say
# "not run" and the call fails, for a second call with --stages.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dry_run=0
stages="versions,unpack,build,gpu-tests,identity,nccl-pair,equivalence,failures,plan,bench"
while (($#)); do
  case $1 in
    --dry-run) dry_run=1 ;;
    --stages) stages=$2; shift ;;
    *) echo "device_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
: >"$OUT/results.txt"
started=$SECONDS
budget=${MNDDP_DEVICE_BUDGET:-470}
status=0
pair_ok=1

log() { printf '[device_check %3ds] %s\n' $((SECONDS - started)) "$*"; }
# row NAME RESULT DETAIL: one line of the result table, written at once.
row() {
  printf '%-13s %-6s %s\n' "$1" "$2" "$3" >>"$OUT/results.txt"
  [ "$2" = FAIL ] && status=1
  log "$1: $2 $3"
}
wanted() { [[ ",$stages," == *",$1,"* ]]; }
# fits NAME SECONDS: whether the stage may start with SECONDS of budget left for it.
fits() {
  local left=$((budget - (SECONDS - started)))
  ((left >= $2)) && return 0
  row "$1" FAIL "not run: ${left} s of the ${budget} s budget left, it needs ~$2 s (rerun with --stages)"
  return 1
}
scratch=""
finish() {
  echo
  echo "== mnddp device check ($( ((dry_run)) && echo dry run || echo GPU)), $((SECONDS - started)) s, logs in $OUT"
  cat "$OUT/results.txt"
  [ -n "$scratch" ] && rm -rf "$scratch"
}
trap finish EXIT

# --- versions --------------------------------------------------------------------------------------
if ((dry_run)); then
  python=$root/.venv/bin/python
else
  python=$(command -v python3)
fi
if wanted versions; then
  ((dry_run)) || { nvidia-smi -L >"$OUT/nvidia-smi.txt" 2>&1 && row gpu ok "$(head -1 "$OUT/nvidia-smi.txt" | cut -c1-60)"; }
  versions=$("$python" -c '
import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "n/a (no GPU)"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}")' 2>&1 | tail -1)
  row versions ok "$versions"
fi

# --- unpack: Open MPI and friends into a prefix; their environment for mnddp's runs only ------------
prefix=${MNDDP_DEVICE_PREFIX:-/opt/deps}
if ((dry_run)); then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/mnddp-device-check.XXXXXX")
  prefix=$scratch/deps
fi
python_ld=${LD_LIBRARY_PATH:-}  # python3 and torch keep the machine's own libraries
if wanted unpack || [ ! -d "$prefix/usr" ]; then
  if bash scripts/device_env.sh unpack device-deps/debs "$prefix" >"$OUT/unpack.log" 2>&1; then
    row unpack ok "$(tail -1 "$OUT/unpack.log")"
  else
    row unpack FAIL "$(tail -1 "$OUT/unpack.log")"
    exit 1
  fi
fi
eval "$(bash scripts/device_env.sh env "$prefix")"
run_ld=$LD_LIBRARY_PATH  # the carried libraries first: for mpiexec, mnddp and the tests
export LD_LIBRARY_PATH=$python_ld MNDDP_RUN_LD_LIBRARY_PATH=$run_ld MPIEXEC=$prefix/usr/bin/mpiexec
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# A VM with loopback alone: Open MPI's shared-memory and self transports, its daemons over lo.
export OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo
with_run_libs() { LD_LIBRARY_PATH=$run_ld "$@"; }
export GTEST_COLOR=no
# count PATTERN FILE: the distinct matches of PATTERN (extended) in FILE, colour escapes removed first
# (gtest names a skipped or failed test twice: as it ends, and in the list at the end).
count() { sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -oE "$1" | sort -u | wc -l; }

# --- build -----------------------------------------------------------------------------------------
build=${MNDDP_DEVICE_BUILD_DIR:-$root/build-device}
cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMNDDP_PYTHON="$python"
  -DCMAKE_CUDA_ARCHITECTURES=90 -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpiexec"
  -DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx"
  -DHDF5_C_COMPILER_EXECUTABLE="$prefix/usr/bin/h5pcc" -DMNDDP_CCACHE=OFF)
export TORCH_CUDA_ARCH_LIST=9.0
targets=(mnddp mnddp-data test_gpu test_nccl_pair mnddp_host_waits)
if wanted build; then
  if ((dry_run)); then
    # A configure only, in a mount namespace where this machine's copies of the carried packages are
    # hidden, as on the device.
    hide=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi
      /usr/include/hdf5 /usr/lib/x86_64-linux-gnu/hdf5 /usr/include/boost /usr/include/spdlog /usr/include/fmt
      /usr/include/nlohmann /usr/include/gtest /usr/include/gmock /usr/include/google)
    rm -rf "$build"
    if MNDDP_DEVICE_CMAKE_ARGS="$(printf '%q ' "${cmake_args[@]}")" with_run_libs unshare -m --propagation private bash -c '
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
    fi
  else
    t=$SECONDS
    if with_run_libs cmake "${cmake_args[@]}" >"$OUT/configure.log" 2>&1 &&
      with_run_libs cmake --build "$build" -j 16 --target "${targets[@]}" >"$OUT/build.log" 2>&1; then
      row build ok "$((SECONDS - t)) s, sm_90, against the device's torch"
    else
      row build FAIL "$((SECONDS - t)) s: $(grep -m1 -E 'error|Error' "$OUT/configure.log" "$OUT/build.log" | cut -c1-90)"
      # Way (b): the binaries built on the CPU machine against the same torch release, stripped.
      [ -x device-deps/prebuilt/mnddp ] || exit 1
      build=$root/device-deps/prebuilt
      # Their run path names the CPU machine's venv: the device's torch and CUDA wheels instead.
      wheels=$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
      run_ld="$wheels/torch/lib:$(find "$wheels/nvidia" -maxdepth 2 -name lib -type d 2>/dev/null | tr '\n' ':')$run_ld"
      export MNDDP_RUN_LD_LIBRARY_PATH=$run_ld
      row fallback ok "the carried binaries of device-deps/prebuilt"
    fi
  fi
fi
# The stages below run on the CPU build in a dry run (their plumbing), on the device build otherwise.
((dry_run)) && build=${MNDDP_BUILD_DIR:-$root/build}
dry=()
((dry_run)) && dry=(--dry-run)

# --- gpu-tests: every GPU test but the pair's; a skip is a failure on a GPU machine ------------------
if wanted gpu-tests && fits gpu-tests 60; then
  if [ -f "$build/CTestTestfile.cmake" ]; then
    (cd "$build" && with_run_libs ctest -L gpu -E test_nccl_pair --output-on-failure --timeout 240 -V) \
      >"$OUT/gpu-tests.log" 2>&1
  else
    with_run_libs timeout 240 "$MPIEXEC" -np 2 "$build/tests/test_gpu" --expect-ranks=2 >"$OUT/gpu-tests.log" 2>&1
  fi
  rc=$?
  passed=$(count '\[       OK \] [A-Za-z0-9_./]+' "$OUT/gpu-tests.log")
  failed=$(count '\[  FAILED  \] [A-Z][A-Za-z0-9_./]+' "$OUT/gpu-tests.log")
  skipped=$(count '\[  SKIPPED \] [A-Z][A-Za-z0-9_./]+' "$OUT/gpu-tests.log")
  detail="$passed ok, $failed failed, $skipped skipped (ctest rc $rc)"
  if ((dry_run)); then
    # Here every GPU test skips: the check must call that a failure (a false pass is what it guards).
    ((skipped > 0)) && row gpu-tests dry "$detail: on a GPU machine this is FAIL" || row gpu-tests FAIL "$detail: no skip seen"
  elif [ "$rc" = 0 ] && ((skipped == 0 && passed > 0)); then
    row gpu-tests ok "$detail"
  else
    row gpu-tests FAIL "$detail"
  fi
fi

# stage_runs NAME SECONDS ARGS...: one of scripts/device_runs.py's stages, its cases as rows.
stage_runs() {
  local name=$1 seconds=$2
  shift 2
  fits "$name" "$seconds" || return
  timeout -k 10 "$seconds" "$python" scripts/device_runs.py "$name" --build "$build" --work "$OUT/$name" \
    "${dry[@]}" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local cases ok_cases
  cases=$(grep -cE '^(ok  |FAIL) ' "$OUT/$name.log")
  ok_cases=$(grep -c '^ok  ' "$OUT/$name.log")
  if [ "$rc" = 0 ] && ((cases > 0)); then
    row "$name" ok "$ok_cases/$cases cases"
  else
    row "$name" FAIL "$ok_cases/$cases cases (rc $rc): $(grep -m1 '^FAIL' "$OUT/$name.log" | cut -c6-120)"
  fi
}

((dry_run)) || export NCCL_CHECK_POINTERS=1
if wanted identity; then stage_runs identity 60; fi

# --- nccl-pair: two ranks on one GPU --------------------------------------------------------------
if wanted nccl-pair && fits nccl-pair 90; then
  if [ -x "$build/tests/test_nccl_pair" ]; then
    with_run_libs timeout -k 10 120 "$MPIEXEC" -np 2 bash tests/gpu/one_gpu_pair.sh "$build/tests/test_nccl_pair" \
      --expect-ranks=2 >"$OUT/nccl-pair.log" 2>&1
    rc=$?
    passed=$(count '\[       OK \] [A-Za-z0-9_./]+' "$OUT/nccl-pair.log")
    skipped=$(count '\[  SKIPPED \] [A-Z][A-Za-z0-9_./]+' "$OUT/nccl-pair.log")
    if grep -qiE "duplicate GPU|ncclInvalidUsage" "$OUT/nccl-pair.log"; then
      pair_ok=0
      row nccl-pair refused "NCCL refused two ranks on one GPU even with NCCL_HOSTID: $(grep -m1 -iE 'duplicate GPU|ncclInvalidUsage' "$OUT/nccl-pair.log" | cut -c1-80)"
    elif ((dry_run)); then
      ((skipped > 0)) && row nccl-pair dry "$skipped skipped without a GPU (rc $rc)" || row nccl-pair FAIL "rc $rc, no skip"
    elif [ "$rc" = 0 ] && ((skipped == 0 && passed > 0)); then
      row nccl-pair ok "$passed ok (two ranks, NCCL over sockets on loopback)"
    else
      row nccl-pair FAIL "$passed ok, $skipped skipped (rc $rc): $(grep -m1 '\[  FAILED  \] [A-Z]' "$OUT/nccl-pair.log")"
    fi
  else
    row nccl-pair FAIL "no $build/tests/test_nccl_pair (built without NCCL?)"
  fi
fi

if wanted equivalence; then
  if ((pair_ok)); then stage_runs equivalence 150; else row equivalence skip "NCCL refused the two-rank world"; fi
fi
if wanted failures; then stage_runs failures 100; fi
if wanted plan; then stage_runs plan 90; fi

# --- bench ----------------------------------------------------------------------------------------
if wanted bench && fits bench 90; then
  left=$((budget - (SECONDS - started) - 5))
  ranks=1,2
  ((pair_ok)) || ranks=1
  # One round in the first call (its budget); a rerun of the stage alone can take more
  # (MNDDP_BENCH_ROUNDS=3 scripts/device_check.sh --stages build,bench).
  timeout -k 10 "$left" "$python" bench/gpu_bench.py --build "$build" --work "$OUT/bench" --ranks "$ranks" \
    --rounds "${MNDDP_BENCH_ROUNDS:-1}" --python "$python" "${dry[@]}" >"$OUT/bench.log" 2>&1
  rc=$?
  while read -r line; do
    [[ $line == *FAIL* ]] && row bench FAIL "${line#ratio }" || row bench ok "${line#ratio }"
  done < <(grep '^ratio' "$OUT/bench.log")
  grep -q '^ratio' "$OUT/bench.log" || row bench FAIL "no result (rc $rc): $(tail -1 "$OUT/bench.log" | cut -c1-90)"
fi
exit "$status"
