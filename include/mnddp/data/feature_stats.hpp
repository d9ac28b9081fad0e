// Per-feature statistics of a dataset's inputs (mean and standard deviation of every element of a
// sample over all samples): computed by `mnddp-data stats`, read back for input normalisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

class H5Reader;

struct FeatureStats {
  std::string path;  // the file they were loaded from (empty when computed here)
  std::vector<std::int64_t> sample_shape;
  std::string sample_type;  // the inputs' stored dtype, e.g. "uint8": stats are of the stored values
  std::int64_t count = 0;   // samples the statistics cover
  std::vector<double> mean;
  std::vector<double> stddev;  // population standard deviation (divides by count)
  std::vector<std::string> files;

  std::int64_t num_features() const { return static_cast<std::int64_t>(mean.size()); }
};

// Mean and std of every feature over all of the reader's samples, in double with Chan et al.'s
// pairwise update of block moments (stable for large counts and large offsets). Reads
// `block_samples` consecutive samples at a time; the reader's non-finite policy applies.
FeatureStats compute_feature_stats(H5Reader& reader, std::int64_t block_samples = 4096);

// Writes the stats as JSON (format "mnddp-feature-stats-1"). Throws UsageError naming the file when
// it exists and !overwrite, or cannot be written.
void save_feature_stats(const FeatureStats& stats, const std::string& path, bool overwrite);

// Reads a file written by save_feature_stats and checks it: well-formed, finite, std >= 0, and
// `sample_numel` features (the data's sample size). Throws UsageError naming the file.
FeatureStats load_feature_stats(const std::string& path, std::int64_t sample_numel);

}  // namespace mnddp
