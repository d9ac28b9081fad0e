# The installed tree as a site's user meets it. `cmake --install` into a prefix, the prefix moved to
# another directory, then, from an empty directory with a clean environment (env -i): Debian's Lmod
# loads the module file, `mnddp version` names the moved executable and every library's file, the man
# pages are found, the demo data is written and 2 ranks train from the installed configs/demo.ini with
# every CUDA toolkit directory hidden (a private mount namespace), the plot script is found beside the
# executable; and a run that names no training data exits 2 with one line.
source "$(dirname "$0")/lib.sh"

BUILD_DIR=$(dirname "$MNDDP_BIN")
LMOD_INIT=/usr/share/lmod/lmod/init/bash
if [ ! -r "$LMOD_INIT" ]; then
  fail "Lmod is not installed ($LMOD_INIT): run scripts/setup.sh"
  finish
  exit
fi

cmake --install "$BUILD_DIR" --prefix "$WORK/first" >"$WORK/install.log" 2>&1
check "cmake --install into a prefix" test $? = 0
mv "$WORK/first" "$WORK/moved"
PREFIX=$WORK/moved
mkdir -p "$WORK/empty" "$WORK/home"

# in_module SCRIPT: SCRIPT run by bash in $WORK/empty with nothing of this environment but PATH's
# system directories, after `module use PREFIX/share/modulefiles; module load mnddp`; under
# "${HIDE[@]}" when set.
HIDE=()
in_module() {
  "${HIDE[@]}" env -i HOME="$WORK/home" PATH=/usr/bin:/bin OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMP_NUM_THREADS=1 LMOD_INIT="$LMOD_INIT" PREFIX="$PREFIX" \
    bash -c 'cd "$HOME/../empty" && source "$LMOD_INIT" && module use "$PREFIX/share/modulefiles" &&
             module load mnddp && '"$1"
}

in_module 'command -v mnddp; echo "root=$MNDDP_ROOT"; mnddp version' >"$WORK/version" 2>&1
check "module load mnddp puts the moved bin/ on PATH" grep -qx "$PREFIX/bin/mnddp" "$WORK/version"
check "... and sets MNDDP_ROOT to the moved prefix" grep -qx "root=$PREFIX" "$WORK/version"
check "mnddp version names the moved executable" grep -qE "^  executable +[0-9.]+ +$PREFIX/bin/mnddp$" "$WORK/version"
check "mnddp version names the loaded torch's file" grep -qE "^  torch \(CPU half\) .*/libtorch_cpu.so$" "$WORK/version"
check "mnddp version names the loaded MPI's file" grep -qE "^  MPI .*/libmpi.so" "$WORK/version"
in_module 'module help mnddp' >"$WORK/help" 2>&1
check "module help names the MPI library and version it was built against" \
  grep -qE "Built against torch [0-9.]+ .*, (Open MPI|MPICH) [0-9]+\.[0-9]+" "$WORK/help"

if grep -q 'man page' "$WORK/install.log" || [ -e "$PREFIX/share/man/man1/mnddp.1" ]; then
  in_module 'man -w mnddp-train && man -w mnddp-data' >"$WORK/man" 2>&1
  check "man mnddp-train and man mnddp-data are found through the module" test $? = 0
  check "... in the moved prefix" grep -q "^$PREFIX/share/man/man1/mnddp-train.1" "$WORK/man"
else
  fail "no man pages were installed (help2man missing? run scripts/setup.sh)"
fi

# hidden CMD...: CMD in a private mount namespace where every CUDA toolkit directory is empty.
hidden() {
  unshare -m --propagation private bash -c '
    empty=$(mktemp -d)
    for d in /usr/local/cuda*; do [ -d "$d" ] && mount --bind "$empty" "$(readlink -f "$d")"; done
    exec "$@"' _ "$@"
}
if hidden true 2>/dev/null; then HIDE=(hidden); else pass "(not hiding the CUDA toolkit: no private mount namespace here)"; fi
in_module '
  ls /usr/local/cuda/ 2>/dev/null | head -1 | sed "s/^/toolkit visible: /"
  mnddp-data synth --out data/demo --train-samples 2048 --val-samples 512 --shards 2 --shape 1,28,28 \
    --classes 10 --noise 8 --seed 1234 >/dev/null &&
  timeout 240 mpirun -np 2 --oversubscribe mnddp train --config "$MNDDP_ROOT/share/mnddp/configs/demo.ini" \
    --epochs 1 --threads 1 --metrics-file "" &&
  mnddp plan --train-data "data/demo/train_*.h5" --max-nodes 2 --plan-steps 3 --plan-warmup 1 --threads 1 \
    --plot plan.png --json plan.json >/dev/null && ls plan.png' >"$WORK/train" 2>&1
RC=$?
check "2 ranks train from the installed demo.ini, CUDA toolkit hidden (rc $RC)" grep -q "final validation accuracy" "$WORK/train"
check "... the toolkit was hidden" eval '! grep -q "^toolkit visible" "$WORK/train" || [ ${#HIDE[@]} = 0 ]'
check "mnddp plan --plot finds the installed plan_plot.py" grep -qx "plan.png" "$WORK/train"

HIDE=()
in_module 'mnddp train --epochs 1' >"$WORK/nodata" 2>&1
RC=$?
check "no --train-data: exit code 2 (got $RC)" test "$RC" = 2
check "... with one line naming the option" test "$(grep -c 'error' "$WORK/nodata")" = 1
check "... which says what to give" grep -q "^mnddp: error: --train-data: required: name the training shards" "$WORK/nodata"

finish
