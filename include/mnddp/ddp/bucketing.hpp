// Gradient bucketing: which parameters share one all-reduce. Pure arithmetic on sizes, no torch,
// so the plan can be tested on its own.
#pragma once

#include <cstddef>
#include <vector>

namespace mnddp {

struct BucketLimits {
  std::size_t first_cap_bytes = 1u << 20;  // small, so the first all-reduce starts early in backward
  std::size_t cap_bytes = 25u << 20;
};

// Parameters are visited in reverse registration order (gradients become ready roughly in that
// order during backward). A bucket takes parameters of one `key` (dtype and device) until its size
// reaches its cap; the first bucket closed uses first_cap_bytes. A parameter larger than the cap
// fills a bucket of its own. Returns the buckets in launch order, each listing parameter indices in
// the order they were added. The plan depends only on the inputs, so it is the same on every rank.
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<std::size_t>& bytes, const std::vector<int>& keys,
                                                   const BucketLimits& limits);

}  // namespace mnddp
