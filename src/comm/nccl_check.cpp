// The NCCL check function.
#include "mnddp/comm/nccl_check.hpp"

#include <fmt/format.h>

namespace mnddp {

void check_nccl(ncclResult_t rc, const char* call, const char* last_error, std::source_location where) {
  if (rc == ncclSuccess) return;
  const bool more = last_error != nullptr && *last_error != '\0';
  throw LibraryError("NCCL", call,
                     fmt::format("{}{}{}", ncclGetErrorString(rc), more ? ": " : "", more ? last_error : ""), where);
}

}  // namespace mnddp
