# Start-up cost at scale: rank 0 reads the config file and scans the shards' metadata, then
# broadcasts both, so N ranks do not each open every file. Counted with strace (open/openat that
# succeed) under mpirun -np 4, per rank, for the config file and each shard, 4 training shards and
# 2 validation shards (64 samples each, one epoch):
# - the config file: rank 0 once, the other ranks never;
# - --partition shard: rank 0 opens every shard once for the scan (and its own again to read it);
#   every other rank opens exactly one training shard, its own, and they are all different;
# - --partition sample (the default): one global shuffle, so every rank reads from every training
#   shard: each rank opens each once, lazily, and keeps it open (never once per batch);
# - validation: each rank opens only the files of its contiguous range of the validation set.
source "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || { echo "FAIL: strace is missing (scripts/setup.sh installs it)"; exit 1; }
make_data
TRAIN_SHARDS=(train_000 train_001 train_002 train_003)
VAL_SHARDS=(val_000 val_001)
cat >"$WORK/run.ini" <<EOF
train-data = $WORK/data/train_*.h5
val-data = $WORK/data/val_*.h5
num-classes = 4
batch-size = 8
epochs = 1
hidden = 32
shuffle-buffer = 32
metrics-file =
EOF
# Each rank runs under its own strace, writing trace.<rank>.
cat >"$WORK/traced.sh" <<'EOF'
#!/bin/bash
exec strace -f -qq -e trace=open,openat -o "$TRACE_DIR/trace.$OMPI_COMM_WORLD_RANK" "$@"
EOF
chmod +x "$WORK/traced.sh"

# opens RANK NAME: successful opens of files named NAME* by that rank.
opens() { grep -F "/$2" "$TRACE_DIR/trace.$1" | grep -Evc '= -1 E[A-Z]+' || true; }

# traced_run PARTITION: 4 ranks under strace; prints the table of opens.
traced_run() {
  TRACE_DIR=$WORK/trace-$1
  mkdir -p "$TRACE_DIR"
  TRACE_DIR=$TRACE_DIR timeout 300 "$MPIEXEC" -np 4 --oversubscribe -x TRACE_DIR "$WORK/traced.sh" "$MNDDP_BIN" train \
    --threads 1 --config "$WORK/run.ini" --partition "$1" >"$WORK/$1.out" 2>&1
  local rc=$?
  CASES=$((CASES + 1))
  if [ "$rc" != 0 ]; then fail "--partition $1 under strace: rc $rc"$'\n'"$(tail -20 "$WORK/$1.out")"; return 1; fi
  pass "--partition $1: 4 ranks under strace; successful opens per rank:"
  printf '        %-6s %-7s' rank run.ini
  printf ' %-10s' "${TRAIN_SHARDS[@]}" "${VAL_SHARDS[@]}"
  echo
  for rank in 0 1 2 3; do
    printf '        %-6s %-7s' "$rank" "$(opens "$rank" run.ini)"
    for shard in "${TRAIN_SHARDS[@]}" "${VAL_SHARDS[@]}"; do printf ' %-10s' "$(opens "$rank" "$shard.h5")"; done
    echo
  done
}

# check NAME CONDITION-COMMAND...: one case.
check() {
  local name=$1
  shift
  CASES=$((CASES + 1))
  if "$@"; then pass "$name"; else fail "$name"; fi
}

config_only_on_rank0() {
  [ "$(opens 0 run.ini)" = 1 ] && [ "$(opens 1 run.ini)" = 0 ] && [ "$(opens 2 run.ini)" = 0 ] && [ "$(opens 3 run.ini)" = 0 ]
}

# Validation: rank r reads samples [32r, 32r+32) of 128, so ranks 0-1 need val_000 and ranks 2-3 val_001
# (rank 0 also opened both for the scan).
validation_ranges_only() {
  [ "$(opens 0 val_000.h5)" = 2 ] && [ "$(opens 0 val_001.h5)" = 1 ] &&
    [ "$(opens 1 val_000.h5)" = 1 ] && [ "$(opens 1 val_001.h5)" = 0 ] &&
    [ "$(opens 2 val_000.h5)" = 0 ] && [ "$(opens 2 val_001.h5)" = 1 ] &&
    [ "$(opens 3 val_000.h5)" = 0 ] && [ "$(opens 3 val_001.h5)" = 1 ]
}

# shard partition: ranks 1-3 open one training shard each, all different, none of rank 0's.
own_shards_only() {
  local rank shard count owned=() rank0_own=""
  for shard in "${TRAIN_SHARDS[@]}"; do
    count=$(opens 0 "$shard.h5")
    case $count in
      1) ;;                      # the scan only
      2) rank0_own+=" $shard" ;; # the scan, then its own shard
      *) return 1 ;;
    esac
  done
  [ -n "$rank0_own" ] || return 1
  for rank in 1 2 3; do
    local mine=()
    for shard in "${TRAIN_SHARDS[@]}"; do
      count=$(opens "$rank" "$shard.h5")
      [ "$count" -le 1 ] || return 1
      [ "$count" = 0 ] || mine+=("$shard")
    done
    [ ${#mine[@]} = 1 ] || return 1
    owned+=("${mine[0]}")
  done
  [ "$(printf '%s\n' "${owned[@]}" $rank0_own | sort -u | wc -l)" = 4 ]
}

# sample partition: ranks 1-3 open every training shard exactly once; rank 0 twice (scan, read).
every_shard_once() {
  local rank shard want
  for rank in 0 1 2 3; do
    want=1
    [ "$rank" != 0 ] || want=2
    for shard in "${TRAIN_SHARDS[@]}"; do [ "$(opens "$rank" "$shard.h5")" = "$want" ] || return 1; done
  done
}

if traced_run shard; then
  check "shard: the config file is opened by rank 0 only" config_only_on_rank0
  check "shard: beyond rank 0's scan, each rank opens only its own training shard, once" own_shards_only
  check "shard: validation files only for each rank's range" validation_ranges_only
fi
if traced_run sample; then
  check "sample: the config file is opened by rank 0 only" config_only_on_rank0
  check "sample: each rank opens every training shard once and keeps it open (rank 0: scan + read)" every_shard_once
  check "sample: validation files only for each rank's range" validation_ranges_only
fi
finish
