// Scanning and validating the HDF5 shards into a ShardIndex: shapes, dtypes, label and token ranges,
// empty files; rank 0 scans and the others receive the index (scan_shards_collective).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/data/h5_types.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

namespace {

constexpr std::size_t kWidestLabelBytes = 16;
constexpr std::int64_t kScanBlock = std::int64_t{1} << 20;  // values read at a time: bounded memory

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::vector<std::int64_t> dataset_shape(hid_t dataset, const std::string& path, const std::string& name) {
  H5Handle space(H5Dget_space(dataset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) throw UsageError(fmt::format("'{}': cannot read the shape of '{}': {}", path, name, h5_take_error()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

H5Handle open_dataset(hid_t file, const std::string& path, const std::string& name) {
  // H5Lexists fails (negative) rather than returning 0 when a parent group in `name` is missing.
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) {
    h5_take_error();
    throw UsageError(fmt::format("'{}': dataset '{}' not found (set --x-name / --y-name)", path, name));
  }
  H5Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dataset) throw UsageError(fmt::format("'{}': '{}' is not a readable dataset: {}", path, name, h5_take_error()));
  return dataset;
}

// Reads `count` rows of `row_numel` values each from `dataset` as `memory_type`, in blocks of about
// kScanBlock values, handing each block to `visit(values, first_row, rows)`.
template <typename T, typename Visit>
void read_in_blocks(hid_t dataset, hid_t memory_type, std::int64_t count, std::int64_t row_numel,
                    const std::string& path, const std::string& name, Visit visit) {
  const std::int64_t block_rows = std::max<std::int64_t>(1, kScanBlock / std::max<std::int64_t>(1, row_numel));
  std::vector<T> values(static_cast<std::size_t>(std::min(count, block_rows) * row_numel));
  H5Handle file_space(H5Dget_space(dataset));
  const int rank = file_space ? H5Sget_simple_extent_ndims(file_space.get()) : -1;
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 1)));
  if (rank > 0) H5Sget_simple_extent_dims(file_space.get(), dims.data(), nullptr);
  for (std::int64_t first = 0; first < count; first += block_rows) {
    const std::int64_t rows = std::min(block_rows, count - first);
    std::vector<hsize_t> start(dims.size(), 0), extent = dims;
    start[0] = static_cast<hsize_t>(first);
    extent[0] = static_cast<hsize_t>(rows);
    H5Handle memory(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr));
    if (rank < 1 || !memory ||
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr) < 0 ||
        H5Dread(dataset, memory_type, memory.get(), file_space.get(), H5P_DEFAULT, values.data()) < 0)
      throw UsageError(fmt::format("'{}': cannot read dataset '{}': {}", path, name, h5_take_error()));
    visit(values.data(), first, rows);
  }
}

// Smallest and largest integer in a dataset (labels, token ids), read in blocks so that even 10^9
// values need little memory.
std::pair<std::int64_t, std::int64_t> integer_range(hid_t dataset, const std::string& path, const std::string& name,
                                                    std::int64_t count, std::int64_t row_numel) {
  std::int64_t low = std::numeric_limits<std::int64_t>::max();
  std::int64_t high = std::numeric_limits<std::int64_t>::min();
  read_in_blocks<std::int64_t>(dataset, H5T_NATIVE_INT64, count, row_numel, path, name,
                               [&](const std::int64_t* values, std::int64_t, std::int64_t rows) {
                                 const auto [min_it, max_it] = std::minmax_element(values, values + rows * row_numel);
                                 low = std::min(low, *min_it);
                                 high = std::max(high, *max_it);
                               });
  return {low, high};
}

// Float targets must all be finite: one NaN makes every later loss NaN, far from its cause.
void check_finite_targets(hid_t y, const std::string& path, const std::string& name, std::int64_t count,
                          std::int64_t row_numel) {
  read_in_blocks<double>(
      y, H5T_NATIVE_DOUBLE, count, row_numel, path, name,
      [&](const double* values, std::int64_t first, std::int64_t rows) {
        const double* end = values + rows * row_numel;
        const double* bad = std::find_if(values, end, [](double v) { return !std::isfinite(v); });
        if (bad == end) return;
        const auto at = bad - values;
        throw UsageError(fmt::format("'{}': dataset '{}' sample {} holds a non-finite target ({} at element {})", path,
                                     name, first + at / row_numel, *bad, at % row_numel));
      });
}

struct ShardMeta {
  std::vector<std::int64_t> x_shape;
  SampleType x_type;
  SampleType label_type = SampleType::I64;
  std::vector<std::int64_t> label_shape;
  std::int64_t label_min = 0;
  std::int64_t label_max = 0;
  std::int64_t chunk_rows = 0;
};
std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Reads y's metadata into `meta` and checks it against x's and the label kind.
void scan_labels(hid_t file, const std::string& path, const std::string& x_name, const std::string& y_name,
                 LabelKind kind, ShardMeta& meta) {
  H5Handle y = open_dataset(file, path, y_name);
  const auto y_shape = dataset_shape(y.get(), path, y_name);
  H5Handle y_type(H5Dget_type(y.get()));
  const H5T_class_t y_class = H5Tget_class(y_type.get());
  const bool integer_labels = y_class == H5T_INTEGER;
  if (kind == LabelKind::Class && (y_shape.size() != 1 || !integer_labels))
    throw UsageError(fmt::format("'{}': dataset '{}' must be a 1-D integer array of class labels, found {} {}", path,
                                 y_name, h5_type_name(y_type.get()), shape_text(y_shape)));
  if (kind == LabelKind::Value && (y_shape.empty() || y_shape.size() > 2 || !(integer_labels || y_class == H5T_FLOAT)))
    throw UsageError(fmt::format(
        "'{}': dataset '{}' must be a numeric array of targets shaped [samples] or [samples, k], found {} {}", path,
        y_name, h5_type_name(y_type.get()), shape_text(y_shape)));
  // HDF5 converts one whole element at a time: a crafted 2 GB integer type costs a 2 GB buffer.
  // No number numpy writes is wider than 16 bytes (np.longdouble).
  if (H5Tget_size(y_type.get()) > kWidestLabelBytes)
    throw UsageError(
        fmt::format("'{}': dataset '{}' has {}-byte elements; labels and targets must be numbers of at "
                    "most {} bytes",
                    path, y_name, H5Tget_size(y_type.get()), kWidestLabelBytes));
  if (y_shape[0] != meta.x_shape[0])
    throw UsageError(fmt::format("'{}': dataset '{}' has {} labels but '{}' has {} samples", path, y_name, y_shape[0],
                                 x_name, meta.x_shape[0]));
  meta.label_shape.assign(y_shape.begin() + 1, y_shape.end());
  const std::int64_t per_sample = product(meta.label_shape);
  if (per_sample == 0)
    throw UsageError(fmt::format("'{}': dataset '{}' has shape {}; each sample's target must hold at least one value",
                                 path, y_name, shape_text(y_shape)));
  if (integer_labels) {
    std::tie(meta.label_min, meta.label_max) = integer_range(y.get(), path, y_name, y_shape[0], per_sample);
  } else {
    meta.label_type = H5Tget_size(y_type.get()) > 4 ? SampleType::F64 : SampleType::F32;
    check_finite_targets(y.get(), path, y_name, y_shape[0], per_sample);
  }
}

ShardMeta scan_one(const std::string& path, const std::string& x_name, const std::string& y_name, LabelKind kind) {
  H5Handle file = h5_open_read_only(path);
  H5Handle x = open_dataset(file.get(), path, x_name);
  if (kind != LabelKind::None) open_dataset(file.get(), path, y_name);  // a missing y is named before x's faults

  ShardMeta meta;
  meta.x_shape = dataset_shape(x.get(), path, x_name);
  if (meta.x_shape.size() < 2)
    throw UsageError(fmt::format("'{}': dataset '{}' has shape {}; it needs at least 2 dimensions [samples, ...]", path,
                                 x_name, shape_text(meta.x_shape)));
  // A sample of no values has nothing to train on, and its rows would be empty buffers downstream.
  if (std::find(meta.x_shape.begin() + 1, meta.x_shape.end(), 0) != meta.x_shape.end())
    throw UsageError(fmt::format("'{}': dataset '{}' has shape {}; each sample must hold at least one value", path,
                                 x_name, shape_text(meta.x_shape)));
  H5Handle x_type(H5Dget_type(x.get()));
  const auto type = sample_type_of(x_type.get());
  if (!type)
    throw UsageError(
        fmt::format("'{}': dataset '{}' has unsupported element type {}; use uint8/16/32/64, int8/16/32/64 or "
                    "float16/32/64",
                    path, x_name, h5_type_name(x_type.get())));
  meta.x_type = *type;
  H5Handle x_dcpl(H5Dget_create_plist(x.get()));
  if (x_dcpl && H5Pget_layout(x_dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(meta.x_shape.size());
    if (H5Pget_chunk(x_dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) > 0)
      meta.chunk_rows = static_cast<std::int64_t>(chunk[0]);
  }
  if (meta.x_shape[0] == 0 || kind == LabelKind::None) return meta;  // empty: skipped by the caller
  scan_labels(file.get(), path, x_name, y_name, kind, meta);
  return meta;
}
std::string label_description(SampleType type, const std::vector<std::int64_t>& shape) {
  return fmt::format("{} labels{}", type == SampleType::I64 ? "integer" : sample_type_name(type),
                     shape.empty() ? std::string() : " " + shape_text(shape));
}
}  // namespace

ShardIndex scan_shards(const std::vector<std::string>& paths, const std::string& x_name, const std::string& y_name,
                       LabelKind labels) {
  if (paths.empty()) throw UsageError("no data files to scan");
  std::lock_guard lock(hdf5_mutex());
  ShardIndex index;
  index.x_name = x_name;
  index.y_name = labels == LabelKind::None ? std::string() : y_name;
  std::vector<std::string> empty;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const ShardMeta meta = scan_one(paths[i], x_name, y_name, labels);
    if (meta.x_shape[0] == 0) {
      // An empty file holds nothing to train on and nothing to disagree about: skip it, say so.
      spdlog::warn("'{}': dataset '{}' has 0 samples (empty shard); skipped", paths[i], x_name);
      empty.push_back(paths[i]);
      continue;
    }
    const std::vector<std::int64_t> sample_shape(meta.x_shape.begin() + 1, meta.x_shape.end());
    if (index.shards.empty()) {
      index.sample_shape = sample_shape;
      index.sample_type = meta.x_type;
      index.label_type = meta.label_type;
      index.label_shape = meta.label_shape;
    } else if (sample_shape != index.sample_shape || meta.x_type != index.sample_type) {
      throw UsageError(fmt::format("shards disagree on '{}': '{}' has samples {} {} but '{}' has {} {}", x_name,
                                   index.shards.front().path, sample_type_name(index.sample_type),
                                   shape_text(index.sample_shape), paths[i], sample_type_name(meta.x_type),
                                   shape_text(sample_shape)));
    }
    if (meta.label_type != index.label_type || meta.label_shape != index.label_shape)
      throw UsageError(fmt::format("shards disagree on '{}': '{}' has {} but '{}' has {}", y_name,
                                   index.shards.front().path, label_description(index.label_type, index.label_shape),
                                   paths[i], label_description(meta.label_type, meta.label_shape)));
    index.shards.push_back({paths[i], meta.x_shape[0], meta.label_min, meta.label_max, meta.chunk_rows});
  }
  if (index.shards.empty())
    throw UsageError(fmt::format(
        "'{}': dataset '{}' has 0 samples (empty shard){}", empty.front(), x_name,
        empty.size() > 1 ? fmt::format(", and so do the other {} files", empty.size() - 1) : std::string()));
  return index;
}

ShardIndex scan_shards_collective(Communicator& comm, const std::string& spec, const std::string& option,
                                  const std::string& x_name, const std::string& y_name, LabelKind labels) {
  std::string text;
  on_root_then_agree(comm,
                     [&] { text = scan_shards(expand_data_paths(spec, option), x_name, y_name, labels).serialize(); });
  broadcast_string(comm, text);
  return ShardIndex::deserialize(text);
}

std::pair<std::int64_t, std::int64_t> scan_input_range(const ShardIndex& index) {
  std::lock_guard lock(hdf5_mutex());
  std::int64_t low = std::numeric_limits<std::int64_t>::max();
  std::int64_t high = std::numeric_limits<std::int64_t>::min();
  for (const auto& shard : index.shards) {
    H5Handle file = h5_open_read_only(shard.path);
    H5Handle x = open_dataset(file.get(), shard.path, index.x_name);
    const auto [shard_low, shard_high] =
        integer_range(x.get(), shard.path, index.x_name, shard.num_samples, index.sample_numel());
    low = std::min(low, shard_low);
    high = std::max(high, shard_high);
  }
  return {low, high};
}

void check_label_range(const ShardIndex& index, int num_classes, const std::string& option) {
  if (index.shards.empty()) return;
  if (!index.has_class_labels())
    throw UsageError(fmt::format(
        "'{}': dataset '{}' must be a 1-D integer array of class labels in [0, {}) set by {}, found {} per sample",
        index.shards.front().path, index.y_name, num_classes, option,
        index.has_labels() ? label_description(index.label_type, index.label_shape) : std::string("no labels")));
  for (const auto& shard : index.shards) {
    if (shard.label_min >= 0 && shard.label_max < num_classes) continue;
    const std::int64_t label = shard.label_min < 0 ? shard.label_min : shard.label_max;
    throw UsageError(fmt::format("'{}': dataset '{}' has label {}, outside [0, {}) set by {} {}", shard.path,
                                 index.y_name, label, num_classes, option, num_classes));
  }
}
}  // namespace mnddp
