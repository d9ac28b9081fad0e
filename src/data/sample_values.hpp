// What a read sample's values become: converted from the file's element type (float32 for inputs
// and regression targets, int64 for token ids) and checked (--nonfinite-inputs, token ids against
// --vocab-size). For H5Reader (h5_reader.cpp).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"

namespace mnddp {

using ConvertFn = void (*)(const void* source, float* target, std::size_t count);
// Integer inputs (token ids) as int64. uint64 ids above INT64_MAX wrap to negative ones, which the
// token check then reports.
using ConvertIdsFn = void (*)(const void* source, std::int64_t* target, std::size_t count);

// The conversion from a native memory type; nullptr for the types scan_shards does not admit (and,
// for ids, for float types).
ConvertFn converter_for(hid_t native_type);
ConvertIdsFn id_converter_for(hid_t native_type);

// A sample's label values as float32 (regression targets).
void labels_to_float(SampleType type, const unsigned char* source, float* target, std::size_t count);

// Applies the non-finite policy to one converted sample (row `row` of `path`); true when it is all
// finite. `warned` is the shard's flag, so that Warn reports a file once however many samples are bad.
bool check_nonfinite(NonfinitePolicy policy, bool& warned, const std::string& path, const std::string& x_name,
                     std::int64_t row, const float* values, std::size_t count);

// Token ids must index the embedding: a negative id or one at or past the vocabulary would read
// out of bounds (a crash on the CPU, a device-side assert on the GPU). Throws UsageError.
void check_token_ids(const std::string& path, const std::string& x_name, std::int64_t row, const std::int64_t* ids,
                     std::size_t count, std::int64_t vocab_size);

}  // namespace mnddp
