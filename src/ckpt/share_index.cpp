// The share files' index: JSON in, JSON out, every claim checked before it sizes anything.
#include "mnddp/ckpt/share_index.hpp"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "mnddp/ckpt/checkpoint_file.hpp"

namespace mnddp {

std::string share_index_to_json(const std::vector<ShareIndexEntry>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : entries)
    list.push_back({{"path", e.path}, {"shape", e.shape}, {"first", e.first}, {"count", e.count}});
  return list.dump();
}

std::vector<ShareIndexEntry> share_index_from_json(const std::string& text, const std::string& where) {
  const auto bad = [&](const std::string& why) {
    return CorruptCheckpoint(fmt::format("share file '{}': its '{}' attribute {}", where, kShareIndexAttribute, why));
  };
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) throw bad("is not a JSON list");
  std::vector<ShareIndexEntry> entries;
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("path") || !item["path"].is_string() || !item.contains("shape") ||
        !item["shape"].is_array() || !item.contains("first") || !item["first"].is_number_integer() ||
        !item.contains("count") || !item["count"].is_number_integer())
      throw bad("has an entry without path, shape, first and count");
    ShareIndexEntry e;
    e.path = item["path"].get<std::string>();
    std::int64_t size = 1;
    for (const auto& d : item["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0) throw bad(fmt::format("gives '{}' a bad shape", e.path));
      const std::int64_t extent = d.get<std::int64_t>();
      if (extent != 0 && size > std::numeric_limits<std::int64_t>::max() / extent)
        throw bad(fmt::format("gives '{}' a shape whose size overflows", e.path));
      size *= extent;
      e.shape.push_back(extent);
    }
    e.first = item["first"].get<std::int64_t>();
    e.count = item["count"].get<std::int64_t>();
    if (e.first < 0 || e.count < 0 || e.first > size || e.count > size - e.first)
      throw bad(
          fmt::format("places '{}' outside its array ({} elements from {} of {})", e.path, e.count, e.first, size));
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace mnddp
