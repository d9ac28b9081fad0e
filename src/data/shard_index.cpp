// ShardIndex: expanding a data spec into files, scanning and validating the HDF5 shards, and the
// text form rank 0 broadcasts so the other ranks never open the files just to learn the metadata.
#include "mnddp/data/shard_index.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {
namespace fs = std::filesystem;

namespace {

constexpr SampleType kAllSampleTypes[] = {SampleType::U8,  SampleType::I8,  SampleType::I16, SampleType::I32,
                                          SampleType::I64, SampleType::F16, SampleType::F32, SampleType::F64};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

bool has_extension(const fs::path& path, std::initializer_list<const char*> extensions) {
  const std::string ext = path.extension().string();
  return std::any_of(extensions.begin(), extensions.end(), [&](const char* e) { return ext == e; });
}

bool is_glob_pattern(const std::string& text) { return text.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> hdf5_files_in(const fs::path& dir, const std::string& option) {
  std::vector<std::string> files;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
    if (it->is_regular_file(error) && has_extension(it->path(), {".h5", ".hdf5"})) files.push_back(it->path().string());
  if (error) throw UsageError(fmt::format("{}: cannot list directory '{}': {}", option, dir.string(), error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t matches{};
  std::vector<std::string> files;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0)
    for (std::size_t i = 0; i < matches.gl_pathc; ++i)
      if (std::error_code ignored; fs::is_regular_file(matches.gl_pathv[i], ignored))
        files.emplace_back(matches.gl_pathv[i]);
  globfree(&matches);
  return files;  // glob(3) returns matches sorted
}

// One comma-free part of a spec. List files may name directories, globs and files, not other lists.
std::vector<std::string> expand_part(const std::string& part, const std::string& option, bool allow_list) {
  const fs::path path(part);
  std::error_code ignored;  // unreadable paths fall through to "file not found"
  if (fs::is_directory(path, ignored)) {
    auto files = hdf5_files_in(path, option);
    if (files.empty()) throw UsageError(fmt::format("{}: no *.h5 or *.hdf5 files in directory '{}'", option, part));
    return files;
  }
  if (is_glob_pattern(part) && !fs::exists(path, ignored)) {
    auto files = glob_files(part);
    if (files.empty()) throw UsageError(fmt::format("{}: no HDF5 files match '{}'", option, part));
    return files;
  }
  if (!fs::is_regular_file(path, ignored)) throw UsageError(fmt::format("{}: file not found: '{}'", option, part));
  if (!has_extension(path, {".txt", ".list"})) return {part};
  if (!allow_list) throw UsageError(fmt::format("{}: list file '{}' is named inside another list file", option, part));

  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{}: cannot read list file '{}'", option, part));
  std::vector<std::string> files;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    fs::path entry(line);
    if (entry.is_relative()) entry = path.parent_path() / entry;  // relative to the list, not the cwd
    auto expanded = expand_part(entry.lexically_normal().string(), option, /*allow_list=*/false);
    files.insert(files.end(), expanded.begin(), expanded.end());
  }
  if (files.empty()) throw UsageError(fmt::format("{}: list file '{}' names no files", option, part));
  return files;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::vector<std::int64_t> dataset_shape(hid_t dataset, const std::string& path, const std::string& name) {
  H5Handle space(H5Dget_space(dataset));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) throw UsageError(fmt::format("'{}': cannot read the shape of '{}': {}", path, name, h5_take_error()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

// Storage type of x, or nullopt for types we do not read (unsigned 16/32/64-bit, long double, ...).
std::optional<SampleType> sample_type_of(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if (size == 1) return is_signed ? SampleType::I8 : SampleType::U8;
      if (!is_signed) return std::nullopt;
      if (size == 2) return SampleType::I16;
      if (size == 4) return SampleType::I32;
      if (size == 8) return SampleType::I64;
      return std::nullopt;
    }
    case H5T_FLOAT:
      if (size == 2) return SampleType::F16;
      if (size == 4) return SampleType::F32;
      if (size == 8) return SampleType::F64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

H5Handle open_dataset(hid_t file, const std::string& path, const std::string& name) {
  // H5Lexists fails (negative) rather than returning 0 when a parent group in `name` is missing.
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) {
    h5_take_error();
    throw UsageError(fmt::format("'{}': dataset '{}' not found (set --x-name / --y-name)", path, name));
  }
  H5Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dataset) throw UsageError(fmt::format("'{}': '{}' is not a readable dataset: {}", path, name, h5_take_error()));
  return dataset;
}

struct ShardMeta {
  std::vector<std::int64_t> x_shape;
  SampleType x_type;
};

ShardMeta scan_one(const std::string& path, const std::string& x_name, const std::string& y_name) {
  H5Handle file = h5_open_read_only(path);
  H5Handle x = open_dataset(file.get(), path, x_name);
  H5Handle y = open_dataset(file.get(), path, y_name);

  const auto x_shape = dataset_shape(x.get(), path, x_name);
  if (x_shape.size() < 2)
    throw UsageError(fmt::format("'{}': dataset '{}' has shape {}; it needs at least 2 dimensions [samples, ...]", path,
                                 x_name, shape_text(x_shape)));
  H5Handle x_type(H5Dget_type(x.get()));
  const auto type = sample_type_of(x_type.get());
  if (!type)
    throw UsageError(
        fmt::format("'{}': dataset '{}' has unsupported element type {}; use uint8, int8/16/32/64 or "
                    "float16/32/64",
                    path, x_name, h5_type_name(x_type.get())));
  if (x_shape[0] == 0) throw UsageError(fmt::format("'{}': dataset '{}' has 0 samples (empty shard)", path, x_name));

  const auto y_shape = dataset_shape(y.get(), path, y_name);
  H5Handle y_type(H5Dget_type(y.get()));
  if (y_shape.size() != 1 || H5Tget_class(y_type.get()) != H5T_INTEGER)
    throw UsageError(fmt::format("'{}': dataset '{}' must be a 1-D integer array of class labels, found {} {}", path,
                                 y_name, h5_type_name(y_type.get()), shape_text(y_shape)));
  if (y_shape[0] != x_shape[0])
    throw UsageError(fmt::format("'{}': dataset '{}' has {} labels but '{}' has {} samples", path, y_name, y_shape[0],
                                 x_name, x_shape[0]));
  return {x_shape, *type};
}

}  // namespace

const char* sample_type_name(SampleType type) {
  switch (type) {
    case SampleType::U8:
      return "uint8";
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

std::string ShardIndex::serialize() const {
  nlohmann::json shard_list = nlohmann::json::array();
  for (const auto& shard : shards) shard_list.push_back({{"path", shard.path}, {"num_samples", shard.num_samples}});
  const nlohmann::json doc = {{"format", "mnddp-shard-index-1"},
                              {"x_name", x_name},
                              {"y_name", y_name},
                              {"sample_type", sample_type_name(sample_type)},
                              {"sample_shape", sample_shape},
                              {"shards", shard_list}};
  return doc.dump();
}

ShardIndex ShardIndex::deserialize(const std::string& text) {
  try {
    const auto doc = nlohmann::json::parse(text);
    if (doc.at("format") != "mnddp-shard-index-1") throw Error("unknown shard index format " + doc.at("format").dump());
    ShardIndex index;
    index.x_name = doc.at("x_name").get<std::string>();
    index.y_name = doc.at("y_name").get<std::string>();
    index.sample_shape = doc.at("sample_shape").get<std::vector<std::int64_t>>();
    const auto type_name = doc.at("sample_type").get<std::string>();
    const auto* type = std::find_if(std::begin(kAllSampleTypes), std::end(kAllSampleTypes),
                                    [&](SampleType t) { return type_name == sample_type_name(t); });
    if (type == std::end(kAllSampleTypes)) throw Error("unknown sample type '" + type_name + "'");
    index.sample_type = *type;
    for (const auto& shard : doc.at("shards"))
      index.shards.push_back({shard.at("path").get<std::string>(), shard.at("num_samples").get<std::int64_t>()});
    return index;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("malformed shard index: {}", e.what()));
  }
}

std::vector<std::string> expand_data_paths(const std::string& spec, const std::string& option) {
  std::vector<std::string> files;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const auto comma = std::min(spec.find(',', start), spec.size());
    const std::string part = trim(spec.substr(start, comma - start));
    if (!part.empty()) {
      auto expanded = expand_part(part, option, /*allow_list=*/true);
      files.insert(files.end(), expanded.begin(), expanded.end());
    }
    start = comma + 1;
  }
  if (files.empty()) throw UsageError(fmt::format("{}: no data files given (value '{}')", option, spec));

  std::sort(files.begin(), files.end());
  // The same file twice would silently double its samples' weight; canonical paths catch a file
  // reached both through its directory and by name.
  std::set<fs::path> seen;
  for (const auto& file : files) {
    std::error_code error;
    fs::path canonical = fs::weakly_canonical(file, error);
    if (error) canonical = fs::absolute(file, error).lexically_normal();
    if (!seen.insert(canonical).second)
      throw UsageError(fmt::format("{}: file '{}' is named more than once in '{}'", option, file, spec));
  }
  return files;
}

ShardIndex scan_shards(const std::vector<std::string>& paths, const std::string& x_name, const std::string& y_name) {
  if (paths.empty()) throw UsageError("no data files to scan");
  std::lock_guard lock(hdf5_mutex());
  ShardIndex index;
  index.x_name = x_name;
  index.y_name = y_name;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const ShardMeta meta = scan_one(paths[i], x_name, y_name);
    const std::vector<std::int64_t> sample_shape(meta.x_shape.begin() + 1, meta.x_shape.end());
    if (i == 0) {
      index.sample_shape = sample_shape;
      index.sample_type = meta.x_type;
    } else if (sample_shape != index.sample_shape || meta.x_type != index.sample_type) {
      throw UsageError(fmt::format("shards disagree on '{}': '{}' has samples {} {} but '{}' has {} {}", x_name,
                                   paths[0], sample_type_name(index.sample_type), shape_text(index.sample_shape),
                                   paths[i], sample_type_name(meta.x_type), shape_text(sample_shape)));
    }
    index.shards.push_back({paths[i], meta.x_shape[0]});
  }
  return index;
}

ShardIndex scan_shards_collective(Communicator& comm, const std::string& spec, const std::string& option,
                                  const std::string& x_name, const std::string& y_name) {
  std::string text;
  on_root_then_agree(comm, [&] { text = scan_shards(expand_data_paths(spec, option), x_name, y_name).serialize(); });
  broadcast_string(comm, text);
  return ShardIndex::deserialize(text);
}

}  // namespace mnddp
