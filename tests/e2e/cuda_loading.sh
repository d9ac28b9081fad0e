# LibTorch's CUDA half (libtorch_cuda.so, cuBLAS, cuSPARSE, ...) is loaded only by a run that may use a
# GPU: never for --device cpu, for --device auto only where a CUDA driver exists, always for --device
# cuda. Seen from outside through the dynamic loader's own log (LD_DEBUG=files). And which CUDA
# runtime and NCCL the process binds (F8 of the GPU review): one of each, the torch wheel's, whatever
# LD_LIBRARY_PATH says; no CUDA toolkit needed at run time; a driver without a loadable CUDA half is
# said at warn level, and --device cuda then exits 2 naming the library.
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/data" --train-samples 64 --val-samples 0 --shards 1 --shape 8 >/dev/null
RUN=(train --train-data "$WORK/data/train_*.h5" --val-data "" --batch-size 16 --max-steps 2 --threads 1
     --checkpoint-dir "" --metrics-file "" --log-level debug)

# run_logged [ENV=VALUE...] -- mnddp args: sets RC and LOG (stderr with the loader's log).
run_logged() {
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env LD_DEBUG=files LD_DEBUG_OUTPUT="$WORK/ld" "${envs[@]}" timeout 60 "$MNDDP_BIN" "${RUN[@]}" "$@" \
    >"$WORK/out" 2>"$WORK/err"
  RC=$?
  LOG=$(cat "$WORK"/ld.* "$WORK/err" 2>/dev/null)
  rm -f "$WORK"/ld.*
}
loads_torch_cuda() { grep -q "file=.*libtorch_cuda.so" <<<"$LOG"; }
not_loads_torch_cuda() { ! loads_torch_cuda; }
# The run's own log, stdout and stderr. No `cat | grep -q`: under pipefail that fails now and then, when
# grep exits on a match while cat still writes (SIGPIPE); it failed CI once, 1 in ~40 in a loop.
said() { grep -q "$1" "$WORK/out" "$WORK/err"; }
loads_cublas() { grep -q "file=.*libcublasLt.so" <<<"$LOG"; }

run_logged -- --device cpu
check "--device cpu trains" test "$RC" = 0
check "--device cpu maps no libtorch_cuda.so" not_loads_torch_cuda
check "--device cpu maps no cuBLASLt" eval '! loads_cublas'
check "--device cpu says why in the debug log" said "CUDA half: not loaded (--device cpu)"

if grep -q "CUDA yes" <<<"$("$MNDDP_BIN" version)"; then
  if [ -e /dev/nvidiactl ] || grep -q "libcuda.so.1" <<<"$(ldconfig -p 2>/dev/null)"; then
    pass "(skipped: this machine has a CUDA driver, so --device auto without one cannot be tried)"
  else
    run_logged -- --device auto
    check "--device auto without a driver trains on the CPU" test "$RC" = 0
    check "--device auto without a driver maps no libtorch_cuda.so" not_loads_torch_cuda
    check "--device auto names the missing driver" said "no CUDA driver: libcuda.so.1"
  fi
  # A driver that is there but finds no GPU: the toolkit's stub libcuda (every call fails).
  if [ -n "${MNDDP_CUDA_STUB:-}" ] && [ -e "$MNDDP_CUDA_STUB" ]; then
    mkdir -p "$WORK/driver" && ln -s "$MNDDP_CUDA_STUB" "$WORK/driver/libcuda.so.1"
    run_logged "LD_LIBRARY_PATH=$WORK/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -- --device auto
    check "--device auto with a driver loads libtorch_cuda.so" loads_torch_cuda
    check "... and, finding no GPU, trains on the CPU" test "$RC" = 0
    check "... on device cpu" said "device cpu backend"
  else
    pass "(skipped: no stub libcuda.so in the CUDA toolkit to stand in for a driver)"
  fi
  run_logged -- --device cuda
  check "--device cuda loads libtorch_cuda.so" loads_torch_cuda
  if [ -e /dev/nvidiactl ]; then
    check "--device cuda trains on a GPU machine" test "$RC" = 0
  else
    check "--device cuda without a GPU exits 2" test "$RC" = 2
    check "--device cuda without a GPU says so" said "error: --device cuda: no CUDA device is visible"
  fi
else
  run_logged -- --device auto
  check "--device auto trains on a build without CUDA" test "$RC" = 0
fi

# inits NAME: the files the loader ran the initialisers of whose name starts with NAME, one a line.
inits() { grep -o "calling init: [^ ]*/$1[^ ]*" <<<"$LOG" | sed 's/calling init: //' | sort -u; }
one_from_the_wheel() {
  local files
  files=$(inits "$1")
  [ "$(grep -c . <<<"$files")" = 1 ] && [[ $files == */site-packages/nvidia/* ]] || {
    echo "$1 loaded from: ${files:-nowhere}"
    return 1
  }
}
if grep -q "CUDA yes" <<<"$("$MNDDP_BIN" version)"; then
  # One libcudart and one libnccl, both the wheel's (the ones torch's CUDA half was built with), even
  # with a toolkit's directories first on LD_LIBRARY_PATH as `module load cuda` puts them.
  for path in "" "/usr/local/cuda/lib64:/usr/local/cuda/lib"; do
    run_logged ${path:+"LD_LIBRARY_PATH=$path"} -- --device cuda
    check "one libcudart, the wheel's (LD_LIBRARY_PATH=${path:-unset})" one_from_the_wheel libcudart.so
    if grep -q "NCCL yes" <<<"$("$MNDDP_BIN" version)"; then
      check "one libnccl, the wheel's (LD_LIBRARY_PATH=${path:-unset})" one_from_the_wheel libnccl.so
    fi
  done
  # hidden CMD...: CMD in a private mount namespace where every CUDA toolkit directory is empty.
  hidden() {
    unshare -m --propagation private bash -c '
      empty=$(mktemp -d)
      for d in /usr/local/cuda*; do [ -d "$d" ] && mount --bind "$empty" "$(readlink -f "$d")"; done
      for f in /usr/local/lib/libcudart* /usr/local/lib/libnccl*; do [ -e "$f" ] && mount --bind /dev/null "$f"; done
      exec "$@"' _ "$@"
  }
  if hidden true 2>/dev/null; then
    hidden env LD_DEBUG=files LD_DEBUG_OUTPUT="$WORK/ld" timeout 60 "$MNDDP_BIN" "${RUN[@]}" --device cpu \
      >"$WORK/out" 2>"$WORK/err"
    RC=$?
    check "no CUDA toolkit: --device cpu trains (rc $RC)" test "$RC" = 0
    rm -f "$WORK"/ld.*
    hidden timeout 60 "$MNDDP_BIN" "${RUN[@]}" --device auto >"$WORK/out" 2>"$WORK/err"
    RC=$?
    check "no CUDA toolkit: --device auto trains (rc $RC)" test "$RC" = 0
  else
    pass "(skipped: no private mount namespace here to hide the CUDA toolkit in)"
  fi
  # A driver that answers while the CUDA half cannot load (a broken install: one of its libraries is
  # an empty file): auto warns and trains on the CPU; cuda exits 2 naming the library.
  cublas=$("$MNDDP_PYTHON" -c 'import nvidia, glob, os; print(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib", "libcublasLt.so.*")))[0])' 2>/dev/null)
  if [ -n "${MNDDP_CUDA_STUB:-}" ] && [ -e "$MNDDP_CUDA_STUB" ] && [ -n "$cublas" ] && hidden true 2>/dev/null; then
    mkdir -p "$WORK/driver" && ln -sf "$MNDDP_CUDA_STUB" "$WORK/driver/libcuda.so.1"
    broken() {
      unshare -m --propagation private bash -c 'mount --bind /dev/null "$1"; shift; exec "$@"' _ "$cublas" \
        env LD_LIBRARY_PATH="$WORK/driver" timeout 60 "$MNDDP_BIN" "${RUN[@]}" "$@" >"$WORK/out" 2>"$WORK/err"
    }
    broken --device auto
    RC=$?
    check "driver, broken CUDA half: --device auto trains on the CPU (rc $RC)" test "$RC" = 0
    check "... and says so at warn level" grep -q "\[warning\].*CUDA driver, but LibTorch's CUDA half did not load" \
      "$WORK/out" "$WORK/err"
    broken --device cuda
    RC=$?
    check "driver, broken CUDA half: --device cuda exits 2 (rc $RC)" test "$RC" = 2
    check "... naming the library" grep -q "cannot load LibTorch's CUDA library: .*libcublasLt" "$WORK/out" "$WORK/err"
  else
    pass "(skipped: no stub driver, cuBLASLt wheel or mount namespace to break the CUDA half with)"
  fi
fi
finish
