// Reading sets of rows (samples) of an HDF5 dataset through HDF5 itself, for what DirectRows cannot
// read: filtered chunks, other byte orders, float16 widened to float, unwritten chunks.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <span>

#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

// Rows [first, first + count) of `dataset` (all of every other dimension), or an invalid handle.
H5Handle h5_select_run(hid_t dataset, hsize_t first, hsize_t count);

// Reads `rows` (ascending, distinct) of `dataset` as `memory_type` into `out`, row after row, each
// `row_bytes` long. `chunked`: the dataset's layout is chunked. False on an HDF5 failure (the error
// stack says why). Call with hdf5_mutex() held.
bool h5_read_rows(hid_t dataset, bool chunked, hid_t memory_type, std::span<const std::int64_t> rows,
                  std::size_t row_bytes, void* out);

}  // namespace mnddp
