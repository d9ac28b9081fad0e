// Per-feature mean and std: a blockwise stable computation over an H5Reader, and the JSON file that
// `mnddp-data stats` writes and the trainer reads for normalisation.
#include "mnddp/data/feature_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

constexpr const char* kStatsFormat = "mnddp-feature-stats-1";

// Running moments of one feature set: count, mean and M2 (sum of squared deviations) per feature.
struct Moments {
  std::int64_t count = 0;
  std::vector<double> mean;
  std::vector<double> m2;
};

// Block moments by two passes over the block (exact for the block), then merged into `total` with
// the pairwise update of Chan, Golub and LeVeque: no catastrophic cancellation at any count.
void merge_block(Moments& total, const float* x, std::int64_t rows, std::size_t features) {
  std::vector<double> block_mean(features, 0.0);
  std::vector<double> block_m2(features, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* sample = x + static_cast<std::size_t>(r) * features;
    for (std::size_t j = 0; j < features; ++j) block_mean[j] += sample[j];
  }
  for (auto& m : block_mean) m /= static_cast<double>(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* sample = x + static_cast<std::size_t>(r) * features;
    for (std::size_t j = 0; j < features; ++j) {
      const double d = sample[j] - block_mean[j];
      block_m2[j] += d * d;
    }
  }
  const auto n_a = static_cast<double>(total.count);
  const auto n_b = static_cast<double>(rows);
  const double n = n_a + n_b;
  for (std::size_t j = 0; j < features; ++j) {
    const double delta = block_mean[j] - total.mean[j];
    total.mean[j] += delta * n_b / n;
    total.m2[j] += block_m2[j] + delta * delta * n_a * n_b / n;
  }
  total.count += rows;
}

[[noreturn]] void bad_stats_file(const std::string& path, const std::string& why) {
  throw UsageError(fmt::format("feature stats file '{}': {}", path, why));
}

}  // namespace

FeatureStats compute_feature_stats(H5Reader& reader, std::int64_t block_samples) {
  const ShardIndex& index = reader.index();
  const auto features = static_cast<std::size_t>(index.sample_numel());
  const std::int64_t total = index.num_samples();
  const std::int64_t block = std::max<std::int64_t>(1, block_samples);
  Moments moments;
  moments.mean.assign(features, 0.0);
  moments.m2.assign(features, 0.0);
  std::vector<std::int64_t> ids;
  std::vector<float> x;
  for (std::int64_t first = 0; first < total; first += block) {
    const std::int64_t rows = std::min(block, total - first);
    ids.resize(static_cast<std::size_t>(rows));
    std::iota(ids.begin(), ids.end(), first);
    x.resize(static_cast<std::size_t>(rows) * features);
    reader.read(ids, x.data(), nullptr);
    merge_block(moments, x.data(), rows, features);
  }

  FeatureStats stats;
  stats.sample_shape = index.sample_shape;
  stats.sample_type = sample_type_name(index.sample_type);
  stats.count = moments.count;
  stats.mean = moments.mean;
  stats.stddev.resize(features);
  for (std::size_t j = 0; j < features; ++j)
    stats.stddev[j] = moments.count > 0 ? std::sqrt(moments.m2[j] / static_cast<double>(moments.count)) : 0.0;
  for (const auto& shard : index.shards) stats.files.push_back(shard.path);
  return stats;
}

void save_feature_stats(const FeatureStats& stats, const std::string& path, bool overwrite) {
  std::error_code ignored;
  if (!overwrite && std::filesystem::exists(path, ignored))
    throw UsageError(fmt::format("'{}' already exists; pass --overwrite to replace it", path));
  const nlohmann::json doc = {{"format", kStatsFormat},
                              {"sample_shape", stats.sample_shape},
                              {"sample_type", stats.sample_type},
                              {"count", stats.count},
                              {"files", stats.files},
                              {"mean", stats.mean},
                              {"std", stats.stddev}};
  // Written beside the target and renamed, so a reader never sees half a file.
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << doc.dump(1) << "\n";
    if (!out.flush()) throw UsageError(fmt::format("cannot write '{}'", partial));
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) throw UsageError(fmt::format("cannot write '{}': {}", path, error.message()));
}

FeatureStats load_feature_stats(const std::string& path, std::int64_t sample_numel) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) bad_stats_file(path, "is a directory, not a stats file");
  std::ifstream in(path);
  if (!in) bad_stats_file(path, "cannot be read (no such file, or no permission)");
  FeatureStats stats;
  stats.path = path;
  try {
    const auto doc = nlohmann::json::parse(in);
    if (doc.at("format") != kStatsFormat)
      bad_stats_file(path, fmt::format("format {} is not {}", doc.at("format").dump(), kStatsFormat));
    stats.sample_shape = doc.at("sample_shape").get<std::vector<std::int64_t>>();
    stats.sample_type = doc.at("sample_type").get<std::string>();
    stats.count = doc.at("count").get<std::int64_t>();
    stats.files = doc.at("files").get<std::vector<std::string>>();
    stats.mean = doc.at("mean").get<std::vector<double>>();
    stats.stddev = doc.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    bad_stats_file(path, fmt::format("not a stats file written by 'mnddp-data stats' ({})", e.what()));
  }
  if (stats.mean.size() != stats.stddev.size())
    bad_stats_file(path, fmt::format("{} means but {} stds", stats.mean.size(), stats.stddev.size()));
  for (std::size_t j = 0; j < stats.mean.size(); ++j)
    if (!std::isfinite(stats.mean[j]) || !std::isfinite(stats.stddev[j]) || stats.stddev[j] < 0)
      bad_stats_file(path, fmt::format("feature {} has mean {} and std {}; both must be finite, std >= 0", j,
                                       stats.mean[j], stats.stddev[j]));
  if (stats.num_features() != sample_numel)
    bad_stats_file(path,
                   fmt::format("{} features, but the data's samples have {}", stats.num_features(), sample_numel));
  return stats;
}

}  // namespace mnddp
