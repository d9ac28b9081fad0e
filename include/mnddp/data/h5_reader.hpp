// H5Reader: reads samples by global index from the shards of a ShardIndex. Indices are sorted per
// shard; rows of unfiltered data are read straight from the file into place, gzip/shuffle chunks are
// read and decoded outside HDF5 on a pool of threads (and cached), others go through HDF5 one
// run of consecutive rows at a time; inputs are converted to float32 (token ids to int64), labels to
// int64 classes or float32 targets. Files stay open.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "mnddp/choices.hpp"
#include "mnddp/data/shard_index.hpp"

namespace mnddp {

struct H5ReaderOptions {
  // What a NaN or infinity in a float input does. Error: UsageError naming file, dataset and sample.
  // Warn: one spdlog warning per file, values pass through. Ignore: values pass through silently.
  NonfinitePolicy nonfinite = NonfinitePolicy::Error;
  // Samples per read() call, when known: the chunk cache of compressed datasets then holds every
  // chunk one batch of consecutive samples touches, so sequential reads decode each chunk once.
  std::int64_t batch_size = 0;
  // read_tokens(): ids must lie in [0, vocab_size); 0: only negative ids are refused.
  std::int64_t vocab_size = 0;
  // Threads (the reading thread included) that inflate gzip/shuffle chunks, a batch's at once.
  int decode_threads = 1;
  // Decoded chunks kept besides the chunks one batch touches: --shuffle-unit chunk's windows.
  std::int64_t min_cached_chunks = 0;
};

class H5Reader {
 public:
  explicit H5Reader(ShardIndex index, H5ReaderOptions options = {});
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  const ShardIndex& index() const { return index_; }
  const H5ReaderOptions& options() const { return options_; }

  // Fills x_out (indices.size() * sample_numel floats) and y_out (indices.size() labels; may be
  // null to skip the labels) in the order of `indices`. Applies the non-finite policy to float
  // inputs (each row once per reader: a row found finite is not checked again). Thread-safe: calls
  // are serialised, and every HDF5 call holds hdf5_mutex(); direct reads do not.
  void read(std::span<const std::int64_t> indices, float* x_out, std::int64_t* y_out);

  // Regression: x as read() does; targets_out gets index().label_numel() float32 values per sample
  // (integer or float64 targets converted).
  void read_targets(std::span<const std::int64_t> indices, float* x_out, float* targets_out);

  // Language modelling: integer inputs as int64 token ids (sample_numel per sample), each checked
  // against H5ReaderOptions::vocab_size (UsageError naming file, dataset, sample and id).
  void read_tokens(std::span<const std::int64_t> indices, std::int64_t* tokens_out);

  // The same samples in their stored element types, native byte order, unchecked: x_out gets
  // sample_numel elements of index().sample_type per sample, y_out (may be null) one element of
  // index().label_type per sample. For tools that copy data without changing it.
  void read_stored(std::span<const std::int64_t> indices, void* x_out, void* y_out);

 private:
  struct OpenShards;
  enum class InputForm { Float, Ids, Stored };    // float32, int64 token ids, or as stored
  enum class LabelForm { Class, Float, Stored };  // int64 class labels, float32 targets, or as stored
  void read_rows(std::span<const std::int64_t> indices, InputForm x_form, LabelForm y_form, void* x_out, void* y_out);

  ShardIndex index_;
  H5ReaderOptions options_;
  std::unique_ptr<OpenShards> open_;
};

}  // namespace mnddp
