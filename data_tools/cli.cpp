// Argument parsing and small value parsers shared by the mnddp-data subcommands.
#include "cli.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <set>

#include "mnddp/data/data_paths.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/error.hpp"

namespace mnddp::tools {

bool parse_arguments(std::span<const std::string> args, const po::options_description& options,
                     const po::positional_options_description& positional, const std::string& usage,
                     po::variables_map& values) {
  po::store(po::command_line_parser(std::vector<std::string>(args.begin(), args.end()))
                .options(options)
                .positional(positional)
                .run(),
            values);
  if (values.count("help")) {
    std::cout << usage << "\n\n" << options << "\n";
    return false;
  }
  po::notify(values);
  return true;
}

std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& option) {
  std::vector<std::int64_t> shape;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    std::int64_t value = 0;
    const char* first = text.data() + start;
    const char* last = text.data() + comma;
    const auto [end, error] = std::from_chars(first, last, value);
    if (first == last || error != std::errc() || end != last || value < 1)
      throw UsageError(fmt::format("{}: '{}' is not a comma-separated list of positive integers", option, text));
    shape.push_back(value);
    start = comma + 1;
  }
  return shape;
}

std::vector<std::string> expand_all(const std::vector<std::string>& specs, const std::string& option) {
  if (specs.empty()) throw UsageError(fmt::format("{}: no input files given", option));
  std::vector<std::string> files;
  std::set<std::filesystem::path> seen;
  for (const auto& spec : specs)
    for (auto& file : expand_data_paths(spec, option)) {
      std::error_code ignored;
      if (!seen.insert(std::filesystem::weakly_canonical(file, ignored)).second)
        throw UsageError(fmt::format("{}: file '{}' is named more than once", option, file));
      files.push_back(std::move(file));
    }
  return files;
}

int gzip_level_of(const std::string& compression, int level) {
  if (compression == "none") return 0;
  if (compression != "gzip")
    throw UsageError(fmt::format("--compression: unknown compression '{}' (use none or gzip)", compression));
  if (level < 1 || level > 9) throw UsageError(fmt::format("--compression-level must be 1 to 9, got {}", level));
  return level;
}

std::string shard_path(const std::string& dir, const std::string& prefix, int number, int count) {
  const int width = std::max<int>(3, static_cast<int>(std::to_string(count - 1).size()));
  return (std::filesystem::path(dir) / fmt::format("{}_{:0{}}.h5", prefix, number, width)).string();
}

std::vector<std::string> stale_outputs(const std::string& dir, const std::string& prefix,
                                       const std::vector<std::string>& outputs) {
  const std::set<std::string> writing(outputs.begin(), outputs.end());
  std::vector<std::string> stale;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string digits =
        name.size() > prefix.size() + 4 && name.rfind(prefix + "_", 0) == 0 && name.ends_with(".h5")
            ? name.substr(prefix.size() + 1, name.size() - prefix.size() - 4)
            : std::string();
    const bool ours =
        !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (ours && !writing.count(entry.path().string())) stale.push_back(entry.path().string());
  }
  std::sort(stale.begin(), stale.end());
  return stale;
}

std::vector<std::string> plan_outputs(const std::string& dir, const std::string& prefix, int shards, bool overwrite) {
  if (shards < 1) throw UsageError(fmt::format("--shards must be at least 1, got {}", shards));
  if (prefix.empty() || prefix.find('/') != std::string::npos)
    throw UsageError(fmt::format("--prefix '{}' must be a non-empty file name part without '/'", prefix));
  make_output_dir(dir, "--out");
  std::vector<std::string> outputs;
  for (int s = 0; s < shards; ++s) outputs.push_back(shard_path(dir, prefix, s, shards));
  require_new_outputs(outputs, overwrite);
  const auto stale = stale_outputs(dir, prefix, outputs);
  if (!stale.empty() && !overwrite)
    throw UsageError(
        fmt::format("'{}' already exists; pass --overwrite to replace the shards in '{}'", stale.front(), dir));
  return outputs;
}

void make_output_dir(const std::string& dir, const std::string& option) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir))
    throw UsageError(fmt::format("{}: cannot create directory '{}': {}", option, dir,
                                 error ? error.message() : "a file of that name exists"));
}

}  // namespace mnddp::tools
