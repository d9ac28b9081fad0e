// Reading an HDF5 dataset's bytes without HDF5, where the file allows it: HDF5's own descriptor, the
// address of contiguous data, and exact preads. For the data loader's direct rows and compressed
// chunks (src/data/) and the checkpoint reader (src/ckpt/), which skip HDF5's selection machinery
// and global lock this way.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mnddp {

// HDF5's own descriptor for `file` when the bytes of `dataset` can be read from it without HDF5:
// the sec2 driver, no user block (addresses then count from byte 0), and a file type equal to
// `memory_type` (no conversion). Call with hdf5_mutex() held; the file handle must outlive its use.
std::optional<int> file_descriptor_for_raw_reads(hid_t file, hid_t dataset, hid_t memory_type);

// Where a contiguous dataset's bytes start in its file; none for another layout, data in external
// files, or data never written (HDF5 supplies the fill value). Call with hdf5_mutex() held.
std::optional<std::uint64_t> contiguous_data_offset(hid_t dataset);

// Reads exactly `bytes` at `offset` of `fd` (the file `path`), resuming after short reads and EINTR.
// Throws UsageError naming the file and the byte on a read error or an early end of file.
void read_exactly(int fd, unsigned char* out, std::size_t bytes, std::uint64_t offset, const std::string& path);

}  // namespace mnddp
