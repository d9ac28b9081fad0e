// Which malloc serves the process: compiled into the mnddp executable only, the one target that
// links tcmalloc (MNDDP_TCMALLOC comes from CMake).
#include "mnddp/host_allocator.hpp"

#include <cstdlib>

#if MNDDP_TCMALLOC
#include <gperftools/tcmalloc.h>
#endif

namespace mnddp {

const char* host_allocator_name() {
#if MNDDP_TCMALLOC
  // tcmalloc defines malloc as an alias of tc_malloc; the process's malloc is tcmalloc's exactly
  // when the dynamic linker bound malloc to it.
  void* (*process_malloc)(std::size_t) = &std::malloc;
  if (reinterpret_cast<void*>(process_malloc) == reinterpret_cast<void*>(&tc_malloc)) return "tcmalloc";
#endif
  return "system malloc";
}

}  // namespace mnddp
