// ShardWriter: chunked (optionally shuffle+gzip) x/y datasets in a "<name>.partial" file that is
// renamed into place on commit, so an interrupted tool never leaves a plausible-looking shard.
#include "mnddp/data/shard_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "mnddp/check.hpp"
#include "mnddp/data/h5_types.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;  // ~1 MiB of samples per chunk

H5Handle create_dataset(hid_t file, const std::string& name, SampleType type, const std::vector<hsize_t>& dims,
                        std::size_t row_bytes, int gzip_level, const std::string& path) {
  H5Handle links(H5Pcreate(H5P_LINK_CREATE));
  MNDDP_H5_CHECK(H5Pset_create_intermediate_group(links.get(), 1));  // allows names like "train/images"
  H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
  std::vector<hsize_t> chunk = dims;
  chunk[0] = static_cast<hsize_t>(
      std::clamp<std::size_t>(kChunkBytes / std::max<std::size_t>(row_bytes, 1), 1, static_cast<std::size_t>(dims[0])));
  MNDDP_H5_CHECK(H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data()));
  if (gzip_level > 0) {
    // Byte-shuffling first groups the high bytes of neighbouring values, which gzip packs far better.
    MNDDP_H5_CHECK(H5Pset_shuffle(props.get()));
    MNDDP_H5_CHECK(H5Pset_deflate(props.get(), static_cast<unsigned>(gzip_level)));
  }
  H5Handle file_type = h5_file_type(type);
  H5Handle dataset(H5Dcreate2(file, name.c_str(), file_type.get(), space.get(), links.get(), props.get(), H5P_DEFAULT));
  if (!dataset) throw UsageError(fmt::format("'{}': cannot create dataset '{}': {}", path, name, h5_take_error()));
  return dataset;
}

void write_rows(hid_t dataset, hid_t memory_type, hsize_t first, hsize_t rows, const void* data) {
  H5Handle file_space(H5Dget_space(dataset));
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(file_space.get())));
  H5Sget_simple_extent_dims(file_space.get(), dims.data(), nullptr);
  std::vector<hsize_t> start(dims.size(), 0);
  start[0] = first;
  dims[0] = rows;
  H5Handle memory(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  MNDDP_H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, dims.data(), nullptr));
  MNDDP_H5_CHECK(H5Dwrite(dataset, memory_type, memory.get(), file_space.get(), H5P_DEFAULT, data));
}

void write_scalar_attribute(hid_t file, const std::string& name, hid_t type, const void* value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attribute(H5Acreate2(file, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  MNDDP_H5_CHECK(H5Awrite(attribute.get(), type, value));
}

}  // namespace

void require_new_outputs(const std::vector<std::string>& paths, bool overwrite) {
  if (overwrite) return;
  for (const auto& path : paths)
    if (std::error_code ignored; std::filesystem::exists(path, ignored))
      throw UsageError(fmt::format("'{}' already exists; pass --overwrite to replace it", path));
}

ShardWriter::ShardWriter(std::string path, std::int64_t num_samples, const ShardLayout& layout)
    : path_(std::move(path)), partial_(path_ + ".partial"), num_samples_(num_samples) {
  if (num_samples_ < 1) throw UsageError(fmt::format("'{}': a shard needs at least one sample", path_));
  if (layout.gzip_level < 0 || layout.gzip_level > 9)
    throw UsageError(fmt::format("--compression-level must be 0 to 9, got {}", layout.gzip_level));
  std::size_t numel = 1;
  for (const auto d : layout.sample_shape) numel *= static_cast<std::size_t>(d);
  x_row_bytes_ = numel * sample_type_size(layout.x_type);

  std::lock_guard lock(hdf5_mutex());
  std::error_code ignored;
  std::filesystem::remove(partial_, ignored);  // left by an earlier interrupted run
  file_ = H5Handle(H5Fcreate(partial_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  if (!file_) throw UsageError(fmt::format("cannot create '{}': {}", partial_, h5_take_error()));
  std::vector<hsize_t> dims{static_cast<hsize_t>(num_samples_)};
  dims.insert(dims.end(), layout.sample_shape.begin(), layout.sample_shape.end());
  x_ = create_dataset(file_.get(), layout.x_name, layout.x_type, dims, x_row_bytes_, layout.gzip_level, path_);
  x_memory_type_ = h5_memory_type(layout.x_type);
  if (layout.y_name.empty()) return;
  std::vector<hsize_t> y_dims{dims[0]};
  std::size_t label_numel = 1;
  for (const auto d : layout.label_shape) {
    y_dims.push_back(static_cast<hsize_t>(d));
    label_numel *= static_cast<std::size_t>(d);
  }
  y_ = create_dataset(file_.get(), layout.y_name, layout.y_type, y_dims, label_numel * sample_type_size(layout.y_type),
                      layout.gzip_level, path_);
  y_memory_type_ = h5_memory_type(layout.y_type);
}

ShardWriter::~ShardWriter() {
  if (committed_) return;
  std::lock_guard lock(hdf5_mutex());
  x_.reset();
  y_.reset();
  file_.reset();
  std::error_code ignored;
  std::filesystem::remove(partial_, ignored);
}

void ShardWriter::write(std::int64_t first, std::int64_t rows, const void* x, const void* y) {
  if (rows <= 0) return;
  if (first < 0 || first + rows > num_samples_)
    throw Error(fmt::format("ShardWriter: rows [{}, {}) outside the {} samples of '{}'", first, first + rows,
                            num_samples_, path_));
  std::lock_guard lock(hdf5_mutex());
  write_rows(x_.get(), x_memory_type_.get(), static_cast<hsize_t>(first), static_cast<hsize_t>(rows), x);
  if (y_) write_rows(y_.get(), y_memory_type_.get(), static_cast<hsize_t>(first), static_cast<hsize_t>(rows), y);
  rows_written_ += rows;
}

void ShardWriter::write_attribute(const std::string& name, std::int64_t value) {
  std::lock_guard lock(hdf5_mutex());
  write_scalar_attribute(file_.get(), name, H5T_NATIVE_INT64, &value);
}

void ShardWriter::write_attribute(const std::string& name, double value) {
  std::lock_guard lock(hdf5_mutex());
  write_scalar_attribute(file_.get(), name, H5T_NATIVE_DOUBLE, &value);
}

void ShardWriter::commit() {
  if (rows_written_ != num_samples_)
    throw Error(fmt::format("ShardWriter: {} of {} samples written to '{}'", rows_written_, num_samples_, path_));
  {
    std::lock_guard lock(hdf5_mutex());
    x_.reset();
    y_.reset();
    if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0)
      throw UsageError(fmt::format("cannot write '{}': {}", partial_, h5_take_error()));
    file_.reset();
  }
  std::error_code error;
  std::filesystem::rename(partial_, path_, error);
  if (error) throw UsageError(fmt::format("cannot move '{}' to '{}': {}", partial_, path_, error.message()));
  committed_ = true;
}

}  // namespace mnddp
