// Raw reads of HDF5 data (see the header).
#include "mnddp/h5/raw_reads.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

std::optional<int> file_descriptor_for_raw_reads(hid_t file, hid_t dataset, hid_t memory_type) {
  // Chunk and dataset addresses count from HDF5's base address, which is 0 only without a user block.
  H5Handle fapl(H5Fget_access_plist(file));
  H5Handle fcpl(H5Fget_create_plist(file));
  hsize_t user_block = 1;
  if (!fapl || !fcpl || H5Pget_driver(fapl.get()) != H5FD_SEC2 || H5Pget_userblock(fcpl.get(), &user_block) < 0 ||
      user_block != 0)
    return std::nullopt;
  H5Handle file_type(H5Dget_type(dataset));
  if (!file_type || H5Tequal(file_type.get(), memory_type) <= 0) return std::nullopt;  // conversion needed
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, fapl.get(), &handle) < 0 || handle == nullptr) return std::nullopt;
  return *static_cast<int*>(handle);
}

std::optional<std::uint64_t> contiguous_data_offset(hid_t dataset) {
  H5Handle dcpl(H5Dget_create_plist(dataset));
  if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_external_count(dcpl.get()) != 0)
    return std::nullopt;
  const haddr_t address = H5Dget_offset(dataset);
  if (address == HADDR_UNDEF) return std::nullopt;
  return address;
}

void read_exactly(int fd, unsigned char* out, std::size_t bytes, std::uint64_t offset, const std::string& path) {
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw UsageError(fmt::format("'{}': cannot read at byte {}: {}", path, offset, std::strerror(errno)));
    if (got == 0)
      throw UsageError(fmt::format(
          "'{}': the file ends at byte {}, before data its HDF5 metadata places there (truncated?)", path, offset));
    out += got;
    bytes -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

}  // namespace mnddp
