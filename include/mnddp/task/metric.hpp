// A named validation metric, and the lookup by name. Torch-free: results and logs use it.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace mnddp {

struct Metric {
  std::string name;
  double value = 0.0;
};

// Whether a larger value of the metric is better: accuracy, top5_accuracy, r2 (and r2_j),
// token_accuracy; errors (loss, mse, mae and their per-target forms) and perplexity are lower-better.
inline bool higher_is_better(std::string_view name) {
  for (std::string_view lower : {"loss", "mse", "mae", "perplexity"})
    if (name.starts_with(lower)) return false;
  return true;
}

// The value of metric `name` in `metrics`, or NaN.
inline double metric_value(const std::vector<Metric>& metrics, std::string_view name) {
  for (const auto& metric : metrics)
    if (metric.name == name) return metric.value;
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mnddp
