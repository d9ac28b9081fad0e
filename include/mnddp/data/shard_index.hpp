// ShardIndex: what the training data is (files, sample counts, sample shape, dtype, label range).
// Rank 0 scans the HDF5 files once and broadcasts the result, so N ranks never open N x files
// just to learn the metadata.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mnddp/data/data_paths.hpp"

namespace mnddp {

class Communicator;

// Storage class of a dataset's elements in the file (byte order aside); the trainer reads inputs
// as float32 (token ids as int64), class labels as int64 and regression targets as float32.
enum class SampleType { U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64 };
const char* sample_type_name(SampleType type);
// Bytes of one element of `type`.
std::size_t sample_type_size(SampleType type);
bool is_float_type(SampleType type);

// What the label dataset must hold. Class: 1-D integers (classification labels). Value: integers
// or floats shaped [N] or [N, k], all finite (regression targets). None: no label dataset is read
// (language modelling: the targets are the inputs shifted by one token).
enum class LabelKind { Class, Value, None };

struct ShardInfo {
  std::string path;
  std::int64_t num_samples = 0;
  // Smallest and largest label in the shard (integer labels only; 0 for float labels).
  std::int64_t label_min = 0;
  std::int64_t label_max = 0;
  // Samples per HDF5 chunk of x (its first chunk dimension); 0 when x is not chunked.
  std::int64_t chunk_rows = 0;
};

struct ShardIndex {
  std::vector<ShardInfo> shards;
  std::vector<std::int64_t> sample_shape;  // shape of one sample (the x dataset without its first dim)
  SampleType sample_type = SampleType::F32;
  // I64 for integer labels whatever their width in the files; F32 or F64 for float labels.
  SampleType label_type = SampleType::I64;
  std::vector<std::int64_t> label_shape;  // one sample's label: [] for y [N], [k] for y [N, k]
  std::string x_name = "x";
  std::string y_name = "y";  // empty: the data has no label dataset (LabelKind::None)

  std::int64_t num_samples() const;
  std::int64_t sample_numel() const;
  std::int64_t label_numel() const;  // values per sample's label (1 for y [N]); 0 without labels
  bool has_labels() const { return !y_name.empty(); }
  bool has_class_labels() const { return has_labels() && label_type == SampleType::I64 && label_shape.empty(); }
  std::vector<std::int64_t> shard_sizes() const;
  // The samples of each chunk of x in every shard, in order (a shard that is not chunked counts as
  // chunks of `unchunked_rows` samples): the units of --shuffle-unit chunk.
  std::vector<std::int64_t> chunk_sizes(std::int64_t unchunked_rows) const;
  // Global sample index -> (shard number, index inside that shard).
  std::pair<std::size_t, std::int64_t> locate(std::int64_t global_index) const;

  std::string serialize() const;
  static ShardIndex deserialize(const std::string& text);
};

// Opens every file and validates x/y (x has rank >= 2 and a supported dtype; y, unless
// LabelKind::None, has the same first dimension and fits the LabelKind; all shards share sample
// shape, dtype and label type and shape; empty shards are skipped with a warning), reading y fully
// to record each shard's label range (integer labels) or to find a non-finite target (float ones).
// Throws UsageError naming the file and the dataset. Local: no communication.
ShardIndex scan_shards(const std::vector<std::string>& paths, const std::string& x_name, const std::string& y_name,
                       LabelKind labels = LabelKind::Class);

// Root expands and scans; the index is broadcast; a failure on root is raised on every rank.
ShardIndex scan_shards_collective(Communicator& comm, const std::string& spec, const std::string& option,
                                  const std::string& x_name, const std::string& y_name,
                                  LabelKind labels = LabelKind::Class);

// The smallest and largest value of the integer inputs of every shard (token ids), read in blocks.
// Local; reads all of x, so the trainer does it only when it must derive the vocabulary size.
std::pair<std::int64_t, std::int64_t> scan_input_range(const ShardIndex& index);

// Throws UsageError naming the first shard whose labels fall outside [0, num_classes), the label
// and `option` (e.g. "--num-classes"). Uses the ranges recorded by the scan: no file access.
void check_label_range(const ShardIndex& index, int num_classes, const std::string& option);

}  // namespace mnddp
