// SampleType <-> HDF5 datatypes: recognising a dataset's element type, and the types the readers and
// writers use in memory (native byte order) and in files (little-endian, as numpy writes by default).
#pragma once

#include <hdf5.h>

#include <optional>

#include "mnddp/data/shard_index.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

// The SampleType of an HDF5 element type, or nullopt for types we do not read (long double,
// strings, compounds, enums, ...). Byte order does not matter.
std::optional<SampleType> sample_type_of(hid_t type);

// The in-memory type for elements of `type`: native byte order. float16 gets an IEEE half in native
// order (HDF5 1.10 has no predefined half type), so raw half bytes pass through unchanged.
H5Handle h5_memory_type(SampleType type);

// The type new files store: little-endian IEEE/two's complement of the same size.
H5Handle h5_file_type(SampleType type);

}  // namespace mnddp
