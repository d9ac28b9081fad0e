# One fuzz test of an MNDDP_FUZZ build (tests/fuzz/fuzz.cmake): HARNESS fuzzed SECONDS from its seed
# corpus, new inputs kept in FOUND and findings in FOUND/../artifacts/NAME.
#   strict  (the INI and incident readers): any crash, leak, input slower than 10 s or allocation over
#           2 GiB fails the test, as libFuzzer reports it.
#   hdf5    (the shard and checkpoint readers): the file goes through HDF5 1.10 before mnddp sees any
#           of it, and a crafted file crashes HDF5 while it parses its own metadata (listed in
#           docs/FAULT_TOLERANCE.md). So each finding's report is judged: the test fails unless the
#           first frame of its stack that is not the sanitizer's or libFuzzer's lies in libhdf5, and
#           fuzzing goes on after one that does. A finding in mnddp's code or the harness fails it.
# Usage: run_fuzz.sh strict|hdf5 HARNESS SECONDS CORPUS FOUND
set -uo pipefail
mode=$1 harness=$2 seconds=$3 corpus=$4 found=$5
name=$(basename "$harness")
artifacts=$(dirname "$found")/artifacts/$name
rm -rf "$artifacts"
mkdir -p "$artifacts" "$found"
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048)
# The harnesses' input files (tests/fuzz/fuzz_input.hpp) go into a directory of this test's own, in
# memory where there is /dev/shm: an input that crashes the process leaves its file behind.
scratch=$(mktemp -d /dev/shm/mnddp-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export MNDDP_FUZZ_DIR=$scratch
# As scripts/fuzz.sh sets them, when ctest runs the test by itself: undefined behaviour is a finding;
# leaks in the libraries we did not build are theirs (tests/asan/lsan.supp).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(dirname "$0")/../asan/lsan.supp:print_suppressions=0}

if [ "$mode" = strict ]; then
  "$harness" -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$found" "$corpus"
  exit
fi

# The first frame of the first stack in a report that is neither the sanitizer's runtime, its
# interceptors, libc's string functions nor libFuzzer's.
first_own_frame() {
  grep -E '^ *#[0-9]+ 0x' |
    grep -vE ' in (__interceptor_|__asan|__sanitizer|__lsan|__ubsan|fuzzer::|__libc|__restore_rt|__mem|__str)|/libc\.so|sysdeps/|/libstdc\+\+\.so' |
    grep -vE ' in (malloc|calloc|realloc|free|operator new|operator delete|memcpy|memmove|memset|memcmp|strlen|raise|abort)[ (]' |
    head -1
}

# libFuzzer stops at a finding; each stop's report is judged as it was written (a finding that needs
# the state earlier inputs left in HDF5 is judged too), then fuzzing resumes from the grown corpus
# until SECONDS are spent.
deadline=$((SECONDS + seconds))
failures=0 inside_hdf5=0 rounds=0
declare -A hdf5_kinds=()
while ((SECONDS < deadline)); do
  rounds=$((rounds + 1))
  log=$artifacts/round-$rounds.log
  "$harness" -max_total_time=$((deadline - SECONDS)) "${limits[@]}" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$found" "$corpus" >"$log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*(DONE|pulse)' "$log" | tail -2
    break
  fi
  report=$(sed -n '/ERROR: \|runtime error: /,$p' "$log")
  frame=$(first_own_frame <<<"$report")
  kind=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-z-]+|runtime error: [a-z ]{1,40}' <<<"$report")
  if [[ $frame == *libhdf5* ]]; then
    inside_hdf5=$((inside_hdf5 + 1))
    function=$(grep -oE ' in H5[A-Za-z0-9_]+' <<<"$report" | head -1)
    hdf5_kinds["${kind#ERROR: }${function:+ (${function# in }...)}"]=1
  else
    echo "FAIL: $name: ${kind:-exit code $rc} outside HDF5, at: ${frame:-no frame} (report: $log)"
    grep -E 'ERROR:|runtime error:|SUMMARY:|^ *#[0-9]+ |Test unit written' <<<"$report" | head -30
    failures=$((failures + 1))
    break
  fi
done
echo "$name: $rounds round(s), $inside_hdf5 finding(s) inside HDF5 itself, $failures elsewhere"
for what in "${!hdf5_kinds[@]}"; do echo "  inside HDF5: $what"; done
[ "$failures" = 0 ]
