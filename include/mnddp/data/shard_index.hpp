// ShardIndex: what the training data is (files, sample counts, sample shape, dtype).
// Rank 0 scans the HDF5 files once and broadcasts the result, so N ranks never open N x files
// just to learn the metadata.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mnddp {

class Communicator;

// Storage class of the input dataset in the file; samples are converted to float32 on read.
enum class SampleType { U8, I8, I16, I32, I64, F16, F32, F64 };
const char* sample_type_name(SampleType type);

struct ShardInfo {
  std::string path;
  std::int64_t num_samples = 0;
};

struct ShardIndex {
  std::vector<ShardInfo> shards;
  std::vector<std::int64_t> sample_shape;  // shape of one sample (the x dataset without its first dim)
  SampleType sample_type = SampleType::F32;
  std::string x_name = "x";
  std::string y_name = "y";

  std::int64_t num_samples() const;
  std::int64_t sample_numel() const;
  // Global sample index -> (shard number, index inside that shard).
  std::pair<std::size_t, std::int64_t> locate(std::int64_t global_index) const;

  std::string serialize() const;
  static ShardIndex deserialize(const std::string& text);
};

// Expands a data spec into a sorted list of files: a directory (every *.h5 / *.hdf5 in it),
// a glob pattern, a text file listing one path per line (name ending in .txt or .list), a single
// file, or a comma-separated mix of those. Throws UsageError naming `option` and the spec when
// nothing matches.
std::vector<std::string> expand_data_paths(const std::string& spec, const std::string& option);

// Opens every file and validates x/y (both exist; x has rank >= 2; y is 1-D integer with the same
// first dimension; all shards share sample shape and dtype class). Throws UsageError naming the
// file and the dataset. Local: no communication.
ShardIndex scan_shards(const std::vector<std::string>& paths, const std::string& x_name, const std::string& y_name);

// Root expands and scans; the index is broadcast; a failure on root is raised on every rank.
ShardIndex scan_shards_collective(Communicator& comm, const std::string& spec, const std::string& option,
                                  const std::string& x_name, const std::string& y_name);

}  // namespace mnddp
