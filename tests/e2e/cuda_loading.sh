# LibTorch's CUDA half (libtorch_cuda.so, cuBLAS, cuSPARSE, ...) is loaded only by a run that may use a
# GPU: never for --device cpu, for --device auto only where a CUDA driver exists, always for --device
# cuda. Seen from outside through the dynamic loader's own log (LD_DEBUG=files).
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
finish
