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

// The value of metric `name` in `metrics`, or NaN.
inline double metric_value(const std::vector<Metric>& metrics, std::string_view name) {
  for (const auto& metric : metrics)
    if (metric.name == name) return metric.value;
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mnddp
