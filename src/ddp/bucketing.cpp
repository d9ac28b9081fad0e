// The bucket plan: reverse registration order, capped sizes, one open bucket per dtype/device key.
#include "mnddp/ddp/bucketing.hpp"

#include <map>
#include <stdexcept>

namespace mnddp {

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<std::size_t>& bytes, const std::vector<int>& keys,
                                                   const BucketLimits& limits) {
  if (bytes.size() != keys.size()) throw std::invalid_argument("plan_buckets: bytes and keys differ in length");
  struct Open {
    std::vector<std::size_t> members;
    std::size_t size = 0;
  };
  std::vector<std::vector<std::size_t>> closed;
  std::map<int, Open> open;  // ordered: leftovers are flushed in a rank-independent order
  for (std::size_t i = bytes.size(); i-- > 0;) {
    Open& bucket = open[keys[i]];
    bucket.members.push_back(i);
    bucket.size += bytes[i];
    const std::size_t cap = closed.empty() ? limits.first_cap_bytes : limits.cap_bytes;
    if (bucket.size >= cap) {
      closed.push_back(std::move(bucket.members));
      bucket = Open{};
    }
  }
  for (auto& [key, bucket] : open)
    if (!bucket.members.empty()) closed.push_back(std::move(bucket.members));
  return closed;
}

}  // namespace mnddp
