// H5Reader: per-shard hyperslab-union reads (one H5Dread for x and one for y per shard per call)
// in the file's own element type, converted to float32 here, and scattered into request order.
#include "mnddp/data/h5_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {
namespace {

using ConvertFn = void (*)(const void* source, float* target, std::size_t count);

template <typename T>
void convert_to_float(const void* source, float* target, std::size_t count) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(target, source, count * sizeof(float));
  } else {
    const auto* values = static_cast<const T*>(source);
    for (std::size_t i = 0; i < count; ++i) target[i] = static_cast<float>(values[i]);
  }
}

// The converter for a native memory type. Only the types scan_shards admits (and the float that
// float16 is widened to) reach here.
ConvertFn converter_for(hid_t native_type) {
  const std::size_t size = H5Tget_size(native_type);
  if (H5Tget_class(native_type) == H5T_FLOAT) {
    if (size == sizeof(float)) return convert_to_float<float>;
    if (size == sizeof(double)) return convert_to_float<double>;
  } else if (H5Tget_class(native_type) == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(native_type) == H5T_SGN_2;
    if (size == 1) return is_signed ? convert_to_float<std::int8_t> : convert_to_float<std::uint8_t>;
    if (is_signed && size == 2) return convert_to_float<std::int16_t>;
    if (is_signed && size == 4) return convert_to_float<std::int32_t>;
    if (is_signed && size == 8) return convert_to_float<std::int64_t>;
  }
  return nullptr;
}

std::vector<hsize_t> dims_of(hid_t dataset) {
  H5Handle space(H5Dget_space(dataset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// Chunk cache policy. Unfiltered chunks: no cache, so HDF5 reads just the selected bytes (with a
// cache it copies each whole touched chunk first, which made random 64-sample batches 1 MiB per
// sample slower). Compressed chunks must be decoded whole anyway: cache a few so sequential
// (evaluation) reads decode each chunk once, not once per batch; HDF5's 1 MiB default would
// silently skip bigger chunks.
H5Handle chunk_cache_access_list(hid_t dataset) {
  constexpr std::size_t kChunksCached = 4;
  constexpr std::size_t kMinBytes = std::size_t{1} << 20;
  constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  constexpr std::size_t kHashSlots = 521;  // a prime well above the chunks that fit
  H5Handle dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Handle dcpl(H5Dget_create_plist(dataset));
  H5Handle type(H5Dget_type(dataset));
  if (!dapl || !dcpl || !type || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return dapl;
  std::size_t bytes = 0;
  if (H5Pget_nfilters(dcpl.get()) > 0) {
    std::vector<hsize_t> chunk(dims_of(dataset).size());
    const int rank = H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    std::size_t chunk_bytes = H5Tget_size(type.get());
    for (int d = 0; d < rank; ++d) chunk_bytes *= chunk[static_cast<std::size_t>(d)];
    bytes = std::clamp(kChunksCached * chunk_bytes, kMinBytes, kMaxBytes);
  }
  H5Pset_chunk_cache(dapl.get(), kHashSlots, bytes, H5D_CHUNK_CACHE_W0_DEFAULT);
  return dapl;
}

H5Handle open_dataset(hid_t file, const std::string& path, const std::string& name) {
  H5Handle probe(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!probe) throw UsageError(fmt::format("'{}': cannot open dataset '{}': {}", path, name, h5_take_error()));
  H5Handle dapl = chunk_cache_access_list(probe.get());
  // Closed first: a second open of a still-open dataset shares its chunk cache and ignores dapl.
  probe.reset();
  H5Handle dataset(H5Dopen2(file, name.c_str(), dapl.get()));
  if (!dataset) throw UsageError(fmt::format("'{}': cannot open dataset '{}': {}", path, name, h5_take_error()));
  return dataset;
}

using Run = std::pair<hsize_t, hsize_t>;  // [first row, number of rows)

// The union of row runs (x all other dimensions) of `full`, a copy of the dataset's dataspace.
// HDF5 1.10 ORs each new block into the selection by walking all earlier ones, which is quadratic
// (4096 runs: ~170 ms), so small groups are OR'ed directly and the groups are merged pairwise
// with H5Scombine_select (4096 runs: ~4 ms).
H5Handle select_runs(hid_t full, std::span<const Run> runs, std::vector<hsize_t>& start, std::vector<hsize_t>& count) {
  constexpr std::size_t kDirectRuns = 64;
  if (runs.size() <= kDirectRuns) {
    H5Handle space(H5Scopy(full));
    for (std::size_t i = 0; i < runs.size() && space; ++i) {
      start[0] = runs[i].first;
      count[0] = runs[i].second;
      if (H5Sselect_hyperslab(space.get(), i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr, count.data(),
                              nullptr) < 0)
        space.reset();
    }
    return space;
  }
  const std::size_t half = runs.size() / 2;
  H5Handle low = select_runs(full, runs.first(half), start, count);
  H5Handle high = select_runs(full, runs.subspan(half), start, count);
  if (!low || !high) return H5Handle();
  return H5Handle(H5Scombine_select(low.get(), H5S_SELECT_OR, high.get()));
}

H5Handle select_rows(hid_t dataset, std::span<const Run> runs) {
  H5Handle full(H5Dget_space(dataset));
  if (!full) return full;
  std::vector<hsize_t> start(dims_of(dataset).size(), 0);
  std::vector<hsize_t> count = dims_of(dataset);
  return select_runs(full.get(), runs, start, count);
}

}  // namespace

struct H5Reader::OpenShards {
  struct Shard {
    H5Handle file;
    H5Handle x;
    H5Handle y;
    H5Handle x_memory_type;  // native form of x's file type (float for float16)
    std::size_t x_element_bytes = 0;
    ConvertFn convert = nullptr;
  };
  std::vector<Shard> shards;
  std::vector<std::int64_t> first_index;  // global index of each shard's first sample
  // Scratch reused across calls; read() holds hdf5_mutex(), which also serialises their use.
  std::vector<unsigned char> x_rows;
  std::vector<std::int64_t> y_rows;

  // Opens shard `number` on first use and checks it still matches what the index says about it.
  void open(const ShardIndex& index, std::size_t number);
};

void H5Reader::OpenShards::open(const ShardIndex& index, std::size_t number) {
  const std::string& path = index.shards[number].path;
  Shard shard;
  shard.file = h5_open_read_only(path);
  shard.x = open_dataset(shard.file.get(), path, index.x_name);
  shard.y = open_dataset(shard.file.get(), path, index.y_name);

  // The index was made by a scan that may be old (or from another rank's view of the filesystem).
  const auto x_dims = dims_of(shard.x.get());
  const auto y_dims = dims_of(shard.y.get());
  std::vector<hsize_t> expected_sample(index.sample_shape.begin(), index.sample_shape.end());
  const auto wanted = static_cast<hsize_t>(index.shards[number].num_samples);
  if (x_dims.size() != expected_sample.size() + 1 ||
      !std::equal(expected_sample.begin(), expected_sample.end(), x_dims.begin() + 1) || x_dims[0] < wanted ||
      y_dims.size() != 1 || y_dims[0] < wanted)
    throw UsageError(
        fmt::format("'{}' changed since it was scanned: datasets '{}'/'{}' no longer hold {} samples of "
                    "the indexed shape",
                    path, index.x_name, index.y_name, wanted));

  H5Handle file_type(H5Dget_type(shard.x.get()));
  // HDF5 has no native half type; its soft conversion widens IEEE half to float exactly.
  shard.x_memory_type =
      H5Handle(index.sample_type == SampleType::F16 ? H5Tcopy(H5T_NATIVE_FLOAT)
                                                    : H5Tget_native_type(file_type.get(), H5T_DIR_ASCEND));
  if (!shard.x_memory_type)
    throw UsageError(fmt::format("'{}': dataset '{}': {}", path, index.x_name, h5_take_error()));
  shard.x_element_bytes = H5Tget_size(shard.x_memory_type.get());
  shard.convert = converter_for(shard.x_memory_type.get());
  if (shard.convert == nullptr)
    throw UsageError(fmt::format("'{}': dataset '{}' has unsupported element type {}", path, index.x_name,
                                 h5_type_name(file_type.get())));
  shards[number] = std::move(shard);
}

H5Reader::H5Reader(ShardIndex index) : index_(std::move(index)), open_(std::make_unique<OpenShards>()) {
  open_->shards.resize(index_.shards.size());
  std::int64_t first = 0;
  for (const auto& shard : index_.shards) {
    open_->first_index.push_back(first);
    first += shard.num_samples;
  }
}

H5Reader::~H5Reader() = default;

void H5Reader::read(std::span<const std::int64_t> indices, float* x_out, std::int64_t* y_out) {
  if (indices.empty()) return;
  const std::int64_t total = index_.num_samples();
  const auto numel = static_cast<std::size_t>(index_.sample_numel());

  struct Request {
    std::size_t shard;
    std::int64_t row;
    std::size_t out;
  };
  std::vector<Request> requests;
  requests.reserve(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t global = indices[i];
    if (global < 0 || global >= total)
      throw Error(fmt::format("H5Reader: sample index {} is outside the data's {} samples", global, total));
    const auto next = std::upper_bound(open_->first_index.begin(), open_->first_index.end(), global);
    const auto shard = static_cast<std::size_t>(next - open_->first_index.begin() - 1);
    requests.push_back({shard, global - open_->first_index[shard], i});
  }
  std::sort(requests.begin(), requests.end(),
            [](const Request& a, const Request& b) { return std::tie(a.shard, a.row) < std::tie(b.shard, b.row); });

  std::lock_guard lock(hdf5_mutex());
  for (std::size_t begin = 0; begin < requests.size();) {
    const std::size_t number = requests[begin].shard;
    std::size_t end = begin;
    while (end < requests.size() && requests[end].shard == number) ++end;

    // Distinct rows in file order (padding may request a sample twice), coalesced into runs.
    std::vector<std::int64_t> rows;
    std::vector<Run> runs;
    for (std::size_t i = begin; i < end; ++i) {
      const std::int64_t row = requests[i].row;
      if (!rows.empty() && rows.back() == row) continue;
      if (!rows.empty() && rows.back() + 1 == row)
        ++runs.back().second;
      else
        runs.emplace_back(static_cast<hsize_t>(row), 1);
      rows.push_back(row);
    }

    if (!open_->shards[number].x) open_->open(index_, number);
    auto& shard = open_->shards[number];
    const std::string& path = index_.shards[number].path;
    open_->x_rows.resize(rows.size() * numel * shard.x_element_bytes);
    open_->y_rows.resize(rows.size());

    auto memory_dims = dims_of(shard.x.get());
    memory_dims[0] = rows.size();
    H5Handle x_memory(H5Screate_simple(static_cast<int>(memory_dims.size()), memory_dims.data(), nullptr));
    const hsize_t y_count = rows.size();
    H5Handle y_memory(H5Screate_simple(1, &y_count, nullptr));
    H5Handle x_file = select_rows(shard.x.get(), runs);
    H5Handle y_file = select_rows(shard.y.get(), runs);
    if (!x_memory || !y_memory || !x_file || !y_file ||
        H5Dread(shard.x.get(), shard.x_memory_type.get(), x_memory.get(), x_file.get(), H5P_DEFAULT,
                open_->x_rows.data()) < 0 ||
        H5Dread(shard.y.get(), H5T_NATIVE_INT64, y_memory.get(), y_file.get(), H5P_DEFAULT, open_->y_rows.data()) < 0)
      throw UsageError(fmt::format("cannot read {} samples from '{}' (datasets '{}', '{}'): {}", rows.size(), path,
                                   index_.x_name, index_.y_name, h5_take_error()));

    // Scatter: requests are sorted by row, so one forward walk pairs each with its row.
    std::size_t row = 0;
    const std::size_t row_bytes = numel * shard.x_element_bytes;
    for (std::size_t i = begin; i < end; ++i) {
      while (rows[row] != requests[i].row) ++row;
      shard.convert(open_->x_rows.data() + row * row_bytes, x_out + requests[i].out * numel, numel);
      y_out[requests[i].out] = open_->y_rows[row];
    }
    begin = end;
  }
}

}  // namespace mnddp
