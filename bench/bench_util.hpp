// Timing helpers shared by the benchmarks: elapsed seconds and the median of repeated runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace mnddp::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace mnddp::bench
