// Which libnccl the process runs with. mnddp links the NCCL of the torch wheel it was built against
// (the one torch's CUDA half loads), so that a process maps one NCCL; a mismatch means something
// (LD_PRELOAD, a module's library) put another in front, and both halves would then disagree on
// NCCL's internals. Checked before NCCL is chosen and again before a communicator is made. Built
// with NCCL only (MNDDP_HAVE_NCCL).
#pragma once

#include <optional>
#include <string>

namespace mnddp {

struct NcclLibrary {
  int loaded_version = 0;  // ncclGetVersion(): major * 10000 + minor * 100 + patch
  int built_version = 0;   // NCCL_VERSION_CODE of the headers mnddp was compiled with
  std::string path;        // the file the loaded ncclGetVersion lives in
};

NcclLibrary loaded_nccl_library();
// "2.28.9" for 22809.
std::string nccl_version_text(int code);
// One line naming both versions and the library when they differ; nothing when they agree.
std::optional<std::string> nccl_library_problem();

}  // namespace mnddp
