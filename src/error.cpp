// Formatting of library errors and the MPI/HDF5 check functions.
#include "mnddp/check.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string>

namespace mnddp {
namespace {

std::string short_path(const char* file) { return std::filesystem::path(file).filename().string(); }

// The innermost message of the HDF5 error stack: the most specific description of what failed.
herr_t take_h5_message(unsigned /*n*/, const H5E_error2_t* entry, void* out) {
  auto* text = static_cast<std::string*>(out);
  if (text->empty() && entry->desc != nullptr) *text = entry->desc;
  return 0;
}

}  // namespace

LibraryError::LibraryError(const std::string& library, const std::string& call, const std::string& detail,
                           std::source_location where)
    : Error(fmt::format("{} call {} failed: {} ({}:{})", library, call, detail, short_path(where.file_name()),
                        where.line())) {}

void check_mpi(int rc, const char* call, std::source_location where) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw LibraryError("MPI", call, std::string(text, static_cast<size_t>(length)), where);
}

void check_h5(long long rc, const char* call, std::source_location where) {
  if (rc >= 0) return;
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, take_h5_message, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw LibraryError("HDF5", call, detail.empty() ? "unknown error" : detail, where);
}

}  // namespace mnddp
