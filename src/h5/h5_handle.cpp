// RAII closing of HDF5 identifiers, the process-wide HDF5 lock (the MPI build of HDF5 is not
// thread-safe), and the read-only open that every data reader shares.
#include "mnddp/h5/h5_handle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

// H5Ewalk2 callback: keeps the innermost (most specific) description on the error stack.
herr_t collect_h5_message(unsigned /*n*/, const H5E_error2_t* entry, void* out) {
  auto* text = static_cast<std::string*>(out);
  if (entry->desc == nullptr || entry->desc[0] == '\0') return 0;
  *text = entry->desc;
  return 1;  // the innermost description is the most specific; stop walking
}

}  // namespace

std::recursive_mutex& hdf5_mutex() {
  // Recursive: a helper holding the lock may call another that locks (e.g. closing handles while
  // reporting an error).
  static std::recursive_mutex mutex;
  return mutex;
}

void H5Handle::reset() {
  if (id_ < 0) return;
  std::lock_guard lock(hdf5_mutex());
  // Close errors are ignored: reset runs in destructors, where there is nobody left to tell.
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_BADID:
      break;  // already invalidated by the library (e.g. after H5close)
    default:
      H5Idec_ref(id_);
      break;
  }
  H5Eclear2(H5E_DEFAULT);
  id_ = H5I_INVALID_HID;
}

void h5_silence_default_errors() {
  std::lock_guard lock(hdf5_mutex());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string h5_take_error() {
  std::lock_guard lock(hdf5_mutex());
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_h5_message, &text);
  H5Eclear2(H5E_DEFAULT);
  // Some HDF5 messages span lines (a dump of the failed read's arguments): one line, one message.
  for (auto& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text.empty() ? "unknown HDF5 error" : text;
}

H5Handle h5_open_read_only(const std::string& path) {
  std::lock_guard lock(hdf5_mutex());
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl) throw UsageError(fmt::format("cannot open HDF5 file '{}': {}", path, h5_take_error()));
#if H5_VERSION_GE(1, 10, 7)
  // Readers never need HDF5's advisory file lock, and it fails outright on many NFS/Lustre mounts
  // and when another process holds the file open for writing.
  H5Pset_file_locking(fapl.get(), false, true);
#endif
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!file) {
    std::string reason = h5_take_error();
    // HDF5's own text is a paragraph; say what is wrong in the words a user needs.
    std::error_code ignored;
    if (!std::filesystem::exists(path, ignored))
      reason = "no such file";
    else if (std::filesystem::is_directory(path, ignored))
      reason = "it is a directory, not a file";
    else if (H5Fis_hdf5(path.c_str()) <= 0)
      reason = "not an HDF5 file";
    throw UsageError(fmt::format("cannot open HDF5 file '{}': {}", path, reason));
  }
  return file;
}

std::vector<hsize_t> h5_dims(hid_t dataset) {
  std::lock_guard lock(hdf5_mutex());
  H5Handle space(H5Dget_space(dataset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

std::string h5_type_name(hid_t type) {
  std::lock_guard lock(hdf5_mutex());
  const std::size_t bits = H5Tget_size(type) * 8;
  const bool big_endian = H5Tget_order(type) == H5T_ORDER_BE;
  std::string name;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      name = fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
      break;
    case H5T_FLOAT:
      name = fmt::format("float{}", bits);
      break;
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_REFERENCE:
      return "reference";
    default:
      h5_take_error();
      return "unknown";
  }
  // One-byte types have no byte order worth mentioning.
  return big_endian && bits > 8 ? name + " (big-endian)" : name;
}

}  // namespace mnddp
