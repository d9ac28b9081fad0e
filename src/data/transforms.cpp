// BatchTransform: uint8 scaling and per-feature normalisation in place, with the reciprocal stds
// precomputed in float so the loader thread adds little to a batch's read time.
#include "mnddp/data/transforms.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mnddp/error.hpp"

namespace mnddp {

BatchTransform::BatchTransform(const TransformOptions& options, const ShardIndex& index)
    : sample_numel_(static_cast<std::size_t>(index.sample_numel())) {
  if (options.feature_stats) {
    const FeatureStats& stats = *options.feature_stats;
    if (stats.num_features() != index.sample_numel())
      throw UsageError(fmt::format("feature stats file '{}': {} features, but the data's samples have {} ([{}])",
                                   stats.path, stats.num_features(), index.sample_numel(),
                                   fmt::join(index.sample_shape, ", ")));
    mean_.assign(stats.mean.begin(), stats.mean.end());
    inverse_std_.resize(stats.stddev.size());
    for (std::size_t j = 0; j < stats.stddev.size(); ++j)
      inverse_std_[j] = static_cast<float>(1.0 / std::max(stats.stddev[j], kMinFeatureStd));
    stats_path_ = stats.path;
    return;
  }
  if (options.scale_uint8 && index.sample_type == SampleType::U8) divisor_ = 255.0f;
}

void BatchTransform::apply(float* x, std::int64_t samples) const {
  if (!mean_.empty()) {
    for (std::int64_t s = 0; s < samples; ++s) {
      float* sample = x + static_cast<std::size_t>(s) * sample_numel_;
      for (std::size_t j = 0; j < sample_numel_; ++j) sample[j] = (sample[j] - mean_[j]) * inverse_std_[j];
    }
    return;
  }
  if (divisor_ == 1.0f) return;
  // Divided, not multiplied by 1/255: correctly rounded, so 51 becomes exactly 0.2f as in x / 255.
  const std::size_t count = static_cast<std::size_t>(samples) * sample_numel_;
  for (std::size_t i = 0; i < count; ++i) x[i] /= divisor_;
}

std::string BatchTransform::describe() const {
  if (!mean_.empty()) return fmt::format("normalise by '{}'", stats_path_);
  if (divisor_ != 1.0f) return "uint8 / 255";
  return "none";
}

}  // namespace mnddp
