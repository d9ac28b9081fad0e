# Fuzz harnesses, one per input mnddp reads from users or from disk (docs/FAULT_TOLERANCE.md):
# fuzz_config (INI file and command line), fuzz_incident (incident files), fuzz_checkpoint
# (checkpoint reader and verifier), fuzz_shard (HDF5 shard scanner and reader). Each has a seed
# corpus in tests/fuzz/corpus/NAME.
#  - ordinary build: NAME_replay runs the harness once on each corpus file (label fuzz);
#  - MNDDP_FUZZ build (scripts/fuzz.sh, clang): NAME is libFuzzer's, and the test fuzzes it for
#    MNDDP_FUZZ_SECONDS from the corpus (tests/fuzz/run_fuzz.sh), failing on a crash, a leak, an input
#    slower than 10 s or an allocation over 2 GiB; for the two HDF5 readers, one that HDF5 itself has
#    while parsing a crafted file is listed instead.
set(MNDDP_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz test fuzzes its harness (MNDDP_FUZZ builds)")
foreach(harness fuzz_config fuzz_incident fuzz_checkpoint fuzz_shard)
  set(corpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${harness})
  if(MNDDP_FUZZ)
    add_executable(${harness} fuzz/${harness}.cpp)
    target_link_options(${harness} PRIVATE -fsanitize=fuzzer)
    # New inputs go to the build tree's copy; the seed corpus is only read.
    set(found ${CMAKE_CURRENT_BINARY_DIR}/fuzz-found/${harness})
    file(MAKE_DIRECTORY ${found})
    set(mode strict)
    if(harness STREQUAL "fuzz_checkpoint" OR harness STREQUAL "fuzz_shard")
      set(mode hdf5)
    endif()
    add_test(NAME ${harness}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${mode} $<TARGET_FILE:${harness}>
                     ${MNDDP_FUZZ_SECONDS} ${corpus} ${found})
    set(target ${harness})
  else()
    add_executable(${harness}_replay fuzz/${harness}.cpp fuzz/replay_main.cpp)
    add_test(NAME ${harness}_replay COMMAND ${harness}_replay ${corpus})
    set(target ${harness}_replay)
    set(harness ${harness}_replay)
  endif()
  target_link_libraries(${target} PRIVATE mnddp_base)
  target_compile_options(${target} PRIVATE ${MNDDP_WARNINGS})
  set_tests_properties(${harness} PROPERTIES LABELS fuzz TIMEOUT 600 ENVIRONMENT "${MNDDP_MPIEXEC_ENV}")
endforeach()
