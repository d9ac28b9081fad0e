// Names of the node-local level's files, and a node's listing of them.
#include "mnddp/ckpt/local_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "mnddp/safe_files.hpp"

namespace fs = std::filesystem;

namespace mnddp {

std::string local_file_name(std::int64_t step, LocalFile::Kind kind, int share, int of) {
  switch (kind) {
    case LocalFile::Kind::Whole:
      return fmt::format("step-{:08d}.h5", step);
    case LocalFile::Kind::Base:
      return fmt::format("step-{:08d}.base.h5", step);
    case LocalFile::Kind::Share:
      return fmt::format("step-{:08d}.share-{:06d}-of-{:06d}.h5", step, share, of);
  }
  return {};
}

LocalFile local_file(std::int64_t step, LocalFile::Kind kind, int share, int of) {
  return LocalFile{step, kind, share, of, local_file_name(step, kind, share, of)};
}

std::optional<LocalFile> parse_local_file_name(const std::string& name) {
  // Bounded lengths: a name is at most a few dozen characters, and no step or rank overflows.
  static const std::regex pattern(R"(step-([0-9]{8,15})(\.base|\.share-([0-9]{6,9})-of-([0-9]{6,9}))?\.h5)");
  if (name.size() > 64) return std::nullopt;
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return std::nullopt;
  LocalFile file;
  file.step = std::stoll(match[1].str());
  if (!match[2].matched) {
    file.kind = LocalFile::Kind::Whole;
  } else if (match[2].str() == ".base") {
    file.kind = LocalFile::Kind::Base;
  } else {
    file.kind = LocalFile::Kind::Share;
    file.share = std::stoi(match[3].str());
    file.of = std::stoi(match[4].str());
    if (file.of < 1 || file.share >= file.of) return std::nullopt;
  }
  file.name = local_file_name(file.step, file.kind, file.share, file.of);
  // One spelling per file: a name that parses but is not the canonical one (more digits) is not ours.
  if (file.name != name) return std::nullopt;
  return file;
}

std::vector<LocalFile> list_local_files(const std::string& directory) {
  std::vector<LocalFile> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    // A symlink (even to a regular file) or a directory is never ours.
    if (entry.symlink_status(error).type() != fs::file_type::regular) continue;
    if (auto file = parse_local_file_name(entry.path().filename().string())) files.push_back(*file);
  }
  std::sort(files.begin(), files.end(), [](const LocalFile& a, const LocalFile& b) { return a.name < b.name; });
  return files;
}

bool is_local_temporary(const std::string& name) {
  if (is_temporary_of(name, kLocalRunMarker)) return true;
  const std::size_t end = name.find(".h5.");
  return end != std::string::npos && parse_local_file_name(name.substr(0, end + 3)) &&
         is_temporary_of(name, name.substr(0, end + 3));
}

}  // namespace mnddp
