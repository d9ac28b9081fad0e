# A configure that lacks a dependency stops with one line naming it, the module to load, the Debian
# and Spack packages and the CMake variable for a copy elsewhere: each package hidden from CMake in
# turn (CMAKE_DISABLE_FIND_PACKAGE_<name>, a wrong Python for torch, xxhash.h whited out of
# /usr/include by an overlay in a private mount namespace), in a fresh build directory of this source
# tree.
source "$(dirname "$0")/lib.sh"
: "${MNDDP_SOURCE_DIR:?}" "${MNDDP_PYTHON:?}"

# configure NAME EXPECTED [cmake args...]: a fresh configure fails, and exactly one line of its output
# is "   mnddp: EXPECTED not found: ..." naming a module or package to load.
configure() {
  local name=$1 expected=$2
  shift 2
  rm -rf "$WORK/build"
  "${HIDE[@]}" cmake -S "$MNDDP_SOURCE_DIR" -B "$WORK/build" -G Ninja -DMNDDP_BUILD_BENCH=OFF \
    -DMNDDP_PYTHON="$MNDDP_PYTHON" "$@" >"$WORK/out" 2>&1
  local rc=$? lines
  lines=$(grep -c "^ *mnddp: .* not found: " "$WORK/out")
  CASES=$((CASES + 1))
  if [ "$rc" = 0 ]; then
    fail "$name: the configure succeeded"$'\n'"$(tail -5 "$WORK/out")"
  elif [ "$lines" != 1 ] || ! grep -q "^ *mnddp: $expected not found: .*\(module load\|Debian: \).*\(<prefix>\|Torch\)$" "$WORK/out"; then
    fail "$name: expected one line ' mnddp: $expected not found: ...'"$'\n'"$(cat "$WORK/out")"
  else
    pass "$name: $(grep "^ *mnddp: " "$WORK/out" | sed 's/^ *//')"
  fi
}

HIDE=()
configure "no MPI" "MPI (C and C++)" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
configure "no Boost" "Boost.Program_options >= 1.70" -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON
configure "no fmt" "fmt" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
configure "no spdlog" "spdlog" -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON
configure "no nlohmann-json" "nlohmann-json >= 3.9" -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
configure "no protobuf" "protobuf (libprotobuf and protoc)" -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON
configure "no zlib" "zlib" -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
configure "no HDF5" "HDF5 (parallel)" -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON
configure "no torch" "LibTorch (.*)" -DMNDDP_PYTHON=/nonexistent/bin/python3
configure "no GoogleTest" "GoogleTest (for the tests)" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON

# /usr/include with xxhash.h whited out (a 0/0 character device in an overlay's upper directory).
mkdir -p "$WORK/upper" "$WORK/overlay-work"
if mknod "$WORK/upper/xxhash.h" c 0 0 2>/dev/null && unshare -m true 2>/dev/null; then
  HIDE=(unshare -m --propagation private bash -c 'mount -t overlay overlay -o "lowerdir=/usr/include,upperdir=$1,workdir=$2" \
    /usr/include && shift 2 && exec "$@"' _ "$WORK/upper" "$WORK/overlay-work")
  configure "no xxHash" "xxHash (xxhash.h, libxxhash)"
else
  pass "(skipped: no private mount namespace and overlay here to hide xxhash.h in)"
fi

finish
