// Input transforms applied by the loader thread to each float batch, before the trainer sees it:
// uint8 scaling to [0, 1] and per-feature normalisation from a `mnddp-data stats` file. No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/data/feature_stats.hpp"
#include "mnddp/data/shard_index.hpp"

namespace mnddp {

// The floor on a feature's std: a constant feature normalises to 0 instead of dividing by zero.
inline constexpr double kMinFeatureStd = 1e-6;

struct TransformOptions {
  // uint8 inputs: x -> x / 255. Other dtypes are never scaled.
  bool scale_uint8 = true;
  // x -> (x - mean) / max(std, kMinFeatureStd) per feature. The stats describe the stored values,
  // so this replaces the uint8 scaling (which normalising would undo anyway).
  std::optional<FeatureStats> feature_stats;
};

class BatchTransform {
 public:
  BatchTransform() = default;  // the identity
  // Throws UsageError naming the stats file when its feature count differs from the data's.
  BatchTransform(const TransformOptions& options, const ShardIndex& index);

  bool is_identity() const { return divisor_ == 1.0f && mean_.empty(); }
  // Transforms `samples` consecutive samples of the index's sample size in place.
  void apply(float* x, std::int64_t samples) const;
  // For the log: "none", "uint8 / 255", "normalise by 'stats.json'".
  std::string describe() const;

 private:
  std::size_t sample_numel_ = 0;
  float divisor_ = 1.0f;
  std::vector<float> mean_;
  std::vector<float> inverse_std_;
  std::string stats_path_;
};

}  // namespace mnddp
