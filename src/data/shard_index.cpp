// ShardIndex: what the scan found in the HDF5 shards (src/data/shard_scan.cpp), the sample types'
// names and sizes, where a global sample lives, and the text form rank 0 broadcasts so the other
// ranks never open the files just to learn the metadata.
#include "mnddp/data/shard_index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "mnddp/error.hpp"

namespace mnddp {

namespace {

constexpr SampleType kAllSampleTypes[] = {SampleType::U8,  SampleType::U16, SampleType::U32, SampleType::U64,
                                          SampleType::I8,  SampleType::I16, SampleType::I32, SampleType::I64,
                                          SampleType::F16, SampleType::F32, SampleType::F64};
constexpr const char* kIndexFormat = "mnddp-shard-index-3";

SampleType sample_type_named(const std::string& name) {
  const auto* type = std::find_if(std::begin(kAllSampleTypes), std::end(kAllSampleTypes),
                                  [&](SampleType t) { return name == sample_type_name(t); });
  if (type == std::end(kAllSampleTypes)) throw Error("unknown sample type '" + name + "'");
  return *type;
}

}  // namespace

const char* sample_type_name(SampleType type) {
  switch (type) {
    case SampleType::U8:
      return "uint8";
    case SampleType::U16:
      return "uint16";
    case SampleType::U32:
      return "uint32";
    case SampleType::U64:
      return "uint64";
    case SampleType::I8:
      return "int8";
    case SampleType::I16:
      return "int16";
    case SampleType::I32:
      return "int32";
    case SampleType::I64:
      return "int64";
    case SampleType::F16:
      return "float16";
    case SampleType::F32:
      return "float32";
    case SampleType::F64:
      return "float64";
  }
  return "unknown";
}

std::size_t sample_type_size(SampleType type) {
  switch (type) {
    case SampleType::U8:
    case SampleType::I8:
      return 1;
    case SampleType::U16:
    case SampleType::I16:
    case SampleType::F16:
      return 2;
    case SampleType::U32:
    case SampleType::I32:
    case SampleType::F32:
      return 4;
    case SampleType::U64:
    case SampleType::I64:
    case SampleType::F64:
      return 8;
  }
  return 0;
}

bool is_float_type(SampleType type) {
  return type == SampleType::F16 || type == SampleType::F32 || type == SampleType::F64;
}

std::int64_t ShardIndex::num_samples() const {
  std::int64_t total = 0;
  for (const auto& shard : shards) total += shard.num_samples;
  return total;
}

std::int64_t ShardIndex::sample_numel() const {
  std::int64_t numel = 1;
  for (auto d : sample_shape) numel *= d;
  return numel;
}

std::int64_t ShardIndex::label_numel() const {
  return has_labels() ? std::accumulate(label_shape.begin(), label_shape.end(), std::int64_t{1}, std::multiplies<>())
                      : 0;
}

std::vector<std::int64_t> ShardIndex::shard_sizes() const {
  std::vector<std::int64_t> sizes;
  for (const auto& shard : shards) sizes.push_back(shard.num_samples);
  return sizes;
}

std::pair<std::size_t, std::int64_t> ShardIndex::locate(std::int64_t global_index) const {
  if (global_index >= 0) {
    std::int64_t local = global_index;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      if (local < shards[s].num_samples) return {s, local};
      local -= shards[s].num_samples;
    }
  }
  throw Error(fmt::format("sample index {} is outside the data's {} samples", global_index, num_samples()));
}

std::vector<std::int64_t> ShardIndex::chunk_sizes(std::int64_t unchunked_rows) const {
  std::vector<std::int64_t> sizes;
  for (const auto& shard : shards) {
    const std::int64_t rows = std::max<std::int64_t>(1, shard.chunk_rows > 0 ? shard.chunk_rows : unchunked_rows);
    for (std::int64_t first = 0; first < shard.num_samples; first += rows)
      sizes.push_back(std::min(rows, shard.num_samples - first));
  }
  return sizes;
}

std::string ShardIndex::serialize() const {
  nlohmann::json shard_list = nlohmann::json::array();
  for (const auto& shard : shards)
    shard_list.push_back({{"path", shard.path},
                          {"num_samples", shard.num_samples},
                          {"label_min", shard.label_min},
                          {"label_max", shard.label_max},
                          {"chunk_rows", shard.chunk_rows}});
  const nlohmann::json doc = {{"format", kIndexFormat},
                              {"x_name", x_name},
                              {"y_name", y_name},
                              {"sample_type", sample_type_name(sample_type)},
                              {"label_type", sample_type_name(label_type)},
                              {"label_shape", label_shape},
                              {"sample_shape", sample_shape},
                              {"shards", shard_list}};
  return doc.dump();
}

ShardIndex ShardIndex::deserialize(const std::string& text) {
  try {
    const auto doc = nlohmann::json::parse(text);
    if (doc.at("format") != kIndexFormat) throw Error("unknown shard index format " + doc.at("format").dump());
    ShardIndex index;
    index.x_name = doc.at("x_name").get<std::string>();
    index.y_name = doc.at("y_name").get<std::string>();
    index.sample_shape = doc.at("sample_shape").get<std::vector<std::int64_t>>();
    index.sample_type = sample_type_named(doc.at("sample_type").get<std::string>());
    index.label_type = sample_type_named(doc.at("label_type").get<std::string>());
    index.label_shape = doc.at("label_shape").get<std::vector<std::int64_t>>();
    for (const auto& shard : doc.at("shards"))
      index.shards.push_back({shard.at("path").get<std::string>(), shard.at("num_samples").get<std::int64_t>(),
                              shard.at("label_min").get<std::int64_t>(), shard.at("label_max").get<std::int64_t>(),
                              shard.at("chunk_rows").get<std::int64_t>()});
    return index;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("malformed shard index: {}", e.what()));
  }
}

}  // namespace mnddp
