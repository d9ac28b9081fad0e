# The command line: help, version, print-config round trip, precedence seen from outside, and
# docs/CONFIG.md being the current generated reference.
source "$(dirname "$0")/lib.sh"

"$MNDDP_BIN" train --help >"$WORK/help" 2>&1
check "train --help exits 0" test $? = 0
check "help is grouped" grep -q "^Optimizer:" "$WORK/help"
check "help names the environment" grep -q "MNDDP_" "$WORK/help"

"$MNDDP_BIN" >/dev/null 2>&1
check "no command exits 2" test $? = 2
"$MNDDP_BIN" frobnicate 2>"$WORK/err"
check "unknown command exits 2" test $? = 2
check "unknown command is named" grep -q "frobnicate" "$WORK/err"
"$MNDDP_BIN" version >"$WORK/version"
check "version names torch" grep -q "torch" "$WORK/version"
if [ -n "${MNDDP_EXPECTED_MALLOC:-}" ]; then
  check "version names the malloc ($MNDDP_EXPECTED_MALLOC)" grep -q ", $MNDDP_EXPECTED_MALLOC)$" "$WORK/version"
fi

check "version names where each library was loaded from" grep -qE "^  MPI .* /.*libmpi" "$WORK/version"

# No default training data: a run names it, or is refused with one line.
"$MNDDP_BIN" train --print-config >/dev/null 2>"$WORK/err"
check "no --train-data: exit code 2" test $? = 2
check "no --train-data: one line naming the option" grep -q "^mnddp: error: --train-data: required" "$WORK/err"
# The rest names it once, through the environment (a --config file or the command line may too).
export MNDDP_TRAIN_DATA='data/train_*.h5'

# --print-config prints an INI that reads back to the same configuration.
"$MNDDP_BIN" train --lr 0.123 --model convnet --val-data "" --print-config >"$WORK/a.ini"
check "print-config exits 0" test $? = 0
"$MNDDP_BIN" train --config "$WORK/a.ini" --print-config >"$WORK/b.ini"
check "print-config round-trips" cmp -s "$WORK/a.ini" "$WORK/b.ini"
check "print-config carries the value" grep -qx "lr = 0.123" "$WORK/b.ini"

# Precedence seen from outside: CLI > env > file.
printf 'lr = 0.3\nepochs = 5\nhidden = 7\n' >"$WORK/p.ini"
MNDDP_LR=0.2 MNDDP_EPOCHS=6 "$MNDDP_BIN" train --config "$WORK/p.ini" --lr 0.1 --print-config >"$WORK/p.out"
check "CLI wins" grep -qx "lr = 0.1" "$WORK/p.out"
check "env wins over file" grep -qx "epochs = 6" "$WORK/p.out"
check "file wins over default" grep -qx "hidden = 7" "$WORK/p.out"

# Under mpirun the config is parsed once and printed once.
timeout 30 "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train --print-config >"$WORK/mpi.ini" 2>/dev/null
check "print-config under mpirun prints once" test "$(grep -c '^lr = ' "$WORK/mpi.ini")" = 1

# Help starts no MPI (a login node, help2man), and under mpirun only rank 0 prints it.
timeout 30 "$MPIEXEC" -np 2 --oversubscribe "$MNDDP_BIN" train --help >"$WORK/mpi-help" 2>/dev/null
check "train --help under mpirun prints once" test "$(grep -c '^Usage' "$WORK/mpi-help")" = 1

# docs/CONFIG.md is generated from the option table; a stale copy fails here.
if [ -n "${MNDDP_SOURCE_DIR:-}" ]; then
  "$MNDDP_BIN" train --help-markdown >"$WORK/CONFIG.md"
  check "docs/CONFIG.md is current (regenerate: mnddp train --help-markdown > docs/CONFIG.md)" \
    cmp -s "$WORK/CONFIG.md" "$MNDDP_SOURCE_DIR/docs/CONFIG.md"
  # Every ready configuration is valid (each option known, each value in range) and listed there.
  for ini in "$MNDDP_SOURCE_DIR"/configs/*.ini "$MNDDP_SOURCE_DIR"/examples/torchscript/train.ini; do
    rel=${ini#"$MNDDP_SOURCE_DIR"/}
    check "$rel parses" sh -c '"$0" train --config "$1" --print-config >/dev/null' "$MNDDP_BIN" "$ini"
    check "$rel is listed in docs/CONFIG.md" grep -qF "\`$rel\`" "$MNDDP_SOURCE_DIR/docs/CONFIG.md"
  done
fi
finish
