// Data specs: a directory, a glob, a list file, a single file or a comma-separated mix of those,
// expanded into a sorted list of distinct files.
#include "mnddp/data/data_paths.hpp"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "mnddp/error.hpp"

namespace mnddp {
namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

}  // namespace mnddp
