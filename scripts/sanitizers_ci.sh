#!/usr/bin/env bash
# The sanitizer suites' short subsets: each input reader
# fuzzed SECONDS (default 10) from its corpus, and the failure-path tests of the torch-free library
# under AddressSanitizer with UndefinedBehaviorSanitizer, then under ThreadSanitizer. Each suite builds
# in its own tree (build-fuzz, build-asan, build-tsan) and only what its tests need; the full suites
# are scripts/fuzz.sh 1800, scripts/asan.sh, scripts/ubsan.sh and scripts/tsan.sh.
# Usage: scripts/sanitizers_ci.sh [SECONDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
seconds=${1:-10}

# Threads, the incident file, the checkpoint directory's files, what a checkpoint or shard claims,
# shard reading: where a failure path meets a thread, a file or input a user wrote. (The configuration
# parser is fuzz_config's, under both sanitizers.)
subset='^(test_failure_threads|test_incident|test_guarded_thread|test_checkpoint_directory_np2|test_h5_reader|'
subset+='test_loader|test_checkpoint_claims|test_shard_claims)$'
say "sanitizers: fuzzing each harness ${seconds} s"
bash "$MNDDP_ROOT/scripts/fuzz.sh" "$seconds"
say "sanitizers: ASan + UBSan subset"
bash "$MNDDP_ROOT/scripts/asan.sh" -L torch-free -R "$subset"
say "sanitizers: TSan subset"
bash "$MNDDP_ROOT/scripts/tsan.sh" -R "$subset"
