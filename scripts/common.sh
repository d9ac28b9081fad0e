# Shared by setup.sh, run.sh and test.sh: paths, the MPI environment and the build step.
# Source it; it defines functions and variables only.

MNDDP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MNDDP_BUILD_DIR="${MNDDP_BUILD_DIR:-$MNDDP_ROOT/build}"
MNDDP_VENV="${MNDDP_VENV:-$MNDDP_ROOT/.venv}"

say() { printf '[mnddp] %s\n' "$*"; }
die() { printf '[mnddp] error: %s\n' "$*" >&2; exit 1; }

# Open MPI refuses to run as root without these; tests oversubscribe the 2-core machine.
mnddp_mpi_env() {
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

# Configure and build with Ninja; ccache keeps rebuilds of a fresh clone fast.
# mnddp_build [TARGET...]: builds the targets (default: everything). The tree is always configured
# with the tests, whichever script configured it first, so run.sh and test.sh share one build
# directory and neither undoes the other (run.sh builds only the two programs it runs).
mnddp_build() {
  local cache="$MNDDP_BUILD_DIR/CMakeCache.txt"
  if [ ! -f "$MNDDP_BUILD_DIR/build.ninja" ] || ! grep -qx 'MNDDP_BUILD_TESTS:BOOL=ON' "$cache" 2>/dev/null; then
    say "configuring $MNDDP_BUILD_DIR"
    # No GPU here: name the architecture so nothing probes for a device at configure time.
    TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" cmake -S "$MNDDP_ROOT" -B "$MNDDP_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE="${MNDDP_BUILD_TYPE:-RelWithDebInfo}" \
      -DMNDDP_PYTHON="$MNDDP_VENV/bin/python" -DMNDDP_BUILD_TESTS=ON ${MNDDP_CMAKE_ARGS:-} \
      || die "cmake configure failed"
  fi
  local targets=()
  (($#)) && targets=(--target "$@")
  say "building ${*:-everything} ($(nproc) jobs)"
  cmake --build "$MNDDP_BUILD_DIR" -j "$(nproc)" "${targets[@]}" || die "build failed"
}

# mnddp_build_tests [ctest arguments]: builds what the tests that ctest selects with these arguments
# need: their own targets when every selected test is one (a unit or MPI test binary), else
# everything (an end-to-end test runs the programs). No arguments: everything.
mnddp_build_tests() {
  (($#)) || { mnddp_build; return; }
  mnddp_build mnddp_base # configures
  local tests targets=() name
  tests=$(cd "$MNDDP_BUILD_DIR" && ctest -N "$@" | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' | sed 's/_np[0-9]*$//' | sort -u)
  local known
  known=$(ninja -C "$MNDDP_BUILD_DIR" -t targets all | sed 's/: .*//')
  for name in $tests; do
    if ! grep -qx -- "$name" <<<"$known"; then
      mnddp_build
      return
    fi
    targets+=("$name")
  done
  ((${#targets[@]})) && mnddp_build "${targets[@]}"
  return 0
}
