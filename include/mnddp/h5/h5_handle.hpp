// RAII for HDF5 identifiers, and the one lock every HDF5 call takes: the MPI build of HDF5 is not
// thread-safe, and the loader thread reads while the main thread may write a checkpoint.
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>
#include <vector>

namespace mnddp {

std::recursive_mutex& hdf5_mutex();

// Owns one hid_t and closes it with the matching H5*close (chosen by H5Iget_type).
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  ~H5Handle() { reset(); }
  H5Handle(H5Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.id_;
      other.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;

  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Silences HDF5's automatic error printing: failures become LibraryError/UsageError with our text.
void h5_silence_default_errors();

// The innermost message on HDF5's error stack (the most specific description), as one line; clears
// the stack.
std::string h5_take_error();

// Opens `path` read-only with HDF5 file locking disabled (readers never need it, and it fails on
// many network filesystems). Throws UsageError "cannot open HDF5 file '<path>': <reason>".
H5Handle h5_open_read_only(const std::string& path);

// A dataset's extent (empty for a scalar, or when HDF5 cannot tell).
std::vector<hsize_t> h5_dims(hid_t dataset);

// A datatype as users name it: "uint8", "int64", "float16", "float32 (big-endian)", "string", ...
std::string h5_type_name(hid_t type);

}  // namespace mnddp
