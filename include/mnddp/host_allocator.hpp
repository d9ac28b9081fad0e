// Which malloc serves the mnddp process. The executable links tcmalloc when the build found it
// (CMake option MNDDP_HOST_ALLOCATOR): torch's CPU tensors then reuse freed pages instead of
// faulting fresh ones in at every step (docs/BENCHMARKS_LOG.md, "tcmalloc").
#pragma once

namespace mnddp {

// "tcmalloc" when tcmalloc's malloc is the process's malloc; "system malloc" when the build did not
// link it, or when LD_PRELOAD put another allocator in front of it.
const char* host_allocator_name();

}  // namespace mnddp
