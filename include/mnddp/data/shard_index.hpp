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
// as float32 and class labels as int64.
enum class SampleType { U8, I8, I16, I32, I64, F16, F32, F64 };
const char* sample_type_name(SampleType type);
// Bytes of one element of `type`.
std::size_t sample_type_size(SampleType type);
bool is_float_type(SampleType type);

// What the label dataset must hold. Class: 1-D integers (the trainer's classification labels).
// Value: 1-D integers or floats (regression targets, accepted by the data tools).
enum class LabelKind { Class, Value };

struct ShardInfo {
  std::string path;
  std::int64_t num_samples = 0;
  // Smallest and largest label in the shard (integer labels only; 0 for float labels).
  std::int64_t label_min = 0;
  std::int64_t label_max = 0;
};

struct ShardIndex {
  std::vector<ShardInfo> shards;
  std::vector<std::int64_t> sample_shape;  // shape of one sample (the x dataset without its first dim)
  SampleType sample_type = SampleType::F32;
  // I64 for integer labels whatever their width in the files; F32 or F64 for float labels.
  SampleType label_type = SampleType::I64;
  std::string x_name = "x";
  std::string y_name = "y";

  std::int64_t num_samples() const;
  std::int64_t sample_numel() const;
  bool has_class_labels() const { return label_type == SampleType::I64; }
  std::vector<std::int64_t> shard_sizes() const;
  // Global sample index -> (shard number, index inside that shard).
  std::pair<std::size_t, std::int64_t> locate(std::int64_t global_index) const;

  std::string serialize() const;
  static ShardIndex deserialize(const std::string& text);
};

// Opens every file and validates x/y (both exist; x has rank >= 2 and a supported dtype; y is 1-D
// with the same first dimension and integer for LabelKind::Class; no shard is empty; all shards
// share sample shape, dtype and label type), reading y fully to record each shard's label range.
// Throws UsageError naming the file and the dataset. Local: no communication.
ShardIndex scan_shards(const std::vector<std::string>& paths, const std::string& x_name, const std::string& y_name,
                       LabelKind labels = LabelKind::Class);

// Root expands and scans; the index is broadcast; a failure on root is raised on every rank.
ShardIndex scan_shards_collective(Communicator& comm, const std::string& spec, const std::string& option,
                                  const std::string& x_name, const std::string& y_name);

// Throws UsageError naming the first shard whose labels fall outside [0, num_classes), the label
// and `option` (e.g. "--num-classes"). Uses the ranges recorded by the scan: no file access.
void check_label_range(const ShardIndex& index, int num_classes, const std::string& option);

}  // namespace mnddp
