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

# Sanitizers apply to our targets only; the prebuilt LibTorch is not instrumented.
function(mnddp_apply_sanitizer)
  if(NOT MNDDP_SANITIZE)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE -fsanitize=${MNDDP_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${MNDDP_SANITIZE})
  endforeach()
endfunction()
