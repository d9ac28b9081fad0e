// The loaded libnccl against the one mnddp was built with.
#include "mnddp/comm/nccl_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

namespace mnddp {

NcclLibrary loaded_nccl_library() {
  NcclLibrary library;
  library.built_version = NCCL_VERSION_CODE;
  ncclGetVersion(&library.loaded_version);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr)
    library.path = info.dli_fname;
  return library;
}

std::string nccl_version_text(int code) {
  if (code < 10000) return fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);  // before 2.9
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

std::optional<std::string> nccl_library_problem() {
  const NcclLibrary library = loaded_nccl_library();
  if (library.loaded_version == library.built_version) return std::nullopt;
  return fmt::format(
      "NCCL: this process loaded NCCL {} ({}), but mnddp was built against NCCL {} (the torch wheel's): "
      "something put another libnccl.so.2 in front (LD_PRELOAD, a module's LD_LIBRARY_PATH); run without it",
      nccl_version_text(library.loaded_version), library.path.empty() ? "unknown file" : library.path,
      nccl_version_text(library.built_version));
}

}  // namespace mnddp
