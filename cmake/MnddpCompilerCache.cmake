# ccache for every compile, with the sloppiness precompiled headers need to be cached at all.
find_program(MNDDP_CCACHE ccache)
if(MNDDP_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      # BASEDIR and NOHASHDIR: paths under the checkout hash as relative ones, so a fresh clone elsewhere
      # (CI) hits the cache (debug info then names the first clone's paths).
      ${CMAKE_COMMAND} -E env "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}" "CCACHE_NOHASHDIR=1"
      ${MNDDP_CCACHE})
  message(STATUS "mnddp: compiling through ccache (${MNDDP_CCACHE})")
endif()

# Sanitizers apply to everything this project compiles and links (libraries, tools, tests,
# benchmarks: one instrumented static library makes every executable that links it need the
# runtime); the prebuilt LibTorch, MPI and HDF5 are not instrumented.
if(MNDDP_SANITIZE)
  add_compile_options(-fsanitize=${MNDDP_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${MNDDP_SANITIZE})
  # Undefined behaviour ends the process: a finding is a failing test, not a line in a log. GCC's
  # "undefined" leaves out float-cast-overflow (clang's includes it): a double too large for the
  # integer it is cast to (a deadline centuries away, a crafted size) is undefined all the same.
  if(MNDDP_SANITIZE MATCHES "undefined")
    add_compile_options(-fsanitize=float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow)
    add_link_options(-fsanitize=float-cast-overflow)
  endif()
  message(STATUS "mnddp: building with -fsanitize=${MNDDP_SANITIZE}")
endif()

# Fuzzing (scripts/fuzz.sh): everything gets libFuzzer's coverage instrumentation; the harnesses link
# its driver (tests/fuzz/CMakeLists.txt).
if(MNDDP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MNDDP_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
