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

# Configure (once) and build with Ninja; ccache keeps rebuilds of a fresh clone fast.
mnddp_build() {
  local build_tests="${1:-ON}"
  if [ ! -f "$MNDDP_BUILD_DIR/build.ninja" ]; then
    say "configuring $MNDDP_BUILD_DIR"
    # No GPU here: name the architecture so nothing probes for a device at configure time.
    TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" cmake -S "$MNDDP_ROOT" -B "$MNDDP_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE="${MNDDP_BUILD_TYPE:-RelWithDebInfo}" \
      -DMNDDP_PYTHON="$MNDDP_VENV/bin/python" -DMNDDP_BUILD_TESTS="$build_tests" ${MNDDP_CMAKE_ARGS:-} \
      || die "cmake configure failed"
  fi
  say "building ($(nproc) jobs)"
  cmake --build "$MNDDP_BUILD_DIR" -j "$(nproc)" || die "build failed"
}
