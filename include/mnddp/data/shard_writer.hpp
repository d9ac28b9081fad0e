// ShardWriter: writes one HDF5 shard (x [n, sample...], y [n, label...] unless there is no y) for the
// data tools, chunked and optionally gzip-compressed, through a temporary file renamed into place
// only when complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/data/shard_index.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

struct ShardLayout {
  std::string x_name = "x";
  std::string y_name = "y";  // empty: no label dataset (token sequences)
  SampleType x_type = SampleType::F32;
  std::vector<std::int64_t> sample_shape;
  SampleType y_type = SampleType::I64;
  std::vector<std::int64_t> label_shape;  // one sample's label: [] for y [n], [k] for y [n, k]
  int gzip_level = 0;                     // 0: uncompressed; 1-9: gzip at that level, after the byte-shuffle filter
};

// Throws UsageError naming the first of `paths` that exists, unless `overwrite`: tools check every
// output before writing any, so a refused run leaves nothing half-replaced.
void require_new_outputs(const std::vector<std::string>& paths, bool overwrite);

class ShardWriter {
 public:
  // Creates "<path>.partial" for `num_samples` samples; commit() renames it to `path`.
  ShardWriter(std::string path, std::int64_t num_samples, const ShardLayout& layout);
  ~ShardWriter();  // removes the partial file unless committed
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Rows [first, first + rows): x as layout.x_type and y as layout.y_type, native byte order (y is
  // ignored when the layout has no label dataset).
  void write(std::int64_t first, std::int64_t rows, const void* x, const void* y);
  // A scalar attribute on the file's root (e.g. num_classes).
  void write_attribute(const std::string& name, std::int64_t value);
  void write_attribute(const std::string& name, double value);
  // Closes the file and renames it into place. Throws Error when not every row was written.
  void commit();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string partial_;
  std::int64_t num_samples_;
  std::int64_t rows_written_ = 0;
  std::size_t x_row_bytes_ = 0;
  H5Handle file_;
  H5Handle x_;
  H5Handle y_;
  H5Handle x_memory_type_;
  H5Handle y_memory_type_;
  bool committed_ = false;
};

}  // namespace mnddp
