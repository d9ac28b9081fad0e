// Atomic checkpoint commit, retention and resume selection.
#include "mnddp/ckpt/checkpoint_manager.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mnddp/error.hpp"

namespace fs = std::filesystem;

namespace mnddp {
namespace {

constexpr const char* kLatest = "latest";
constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".h5";

// fsync a file or a directory so that a rename is durable before we rely on it.
void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(fmt::format("cannot open '{}' to sync it: {}", path, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("fsync of '{}' failed: {}", path, std::strerror(saved)));
}

void rename_durably(const std::string& from, const std::string& to, const std::string& directory) {
  sync_path(from);
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno)));
  sync_path(directory);
}

bool is_committed_name(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && name.size() > std::strlen(kPrefix) + std::strlen(kSuffix) &&
         name.compare(name.size() - std::strlen(kSuffix), std::strlen(kSuffix), kSuffix) == 0;
}

// Root only: the path of a checkpoint that verifies, or "" with the reason in `why`.
bool verifies(const std::string& path, std::string& why) {
  try {
    CheckpointReader reader(path);
    if (!reader.has_attribute("format_version") || !reader.has_attribute("step"))
      throw UsageError(fmt::format("'{}' is not an mnddp checkpoint (no format_version/step)", path));
    reader.verify_all();
    return true;
  } catch (const std::exception& e) {
    why = e.what();
    return false;
  }
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, int keep_last, Communicator& comm)
    : directory_(std::move(directory)), keep_last_(keep_last) {
  on_root_then_agree(comm, [&] {
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error || !fs::is_directory(directory_))
      throw UsageError(fmt::format("--checkpoint-dir: cannot create '{}': {}", directory_, error.message()));
    // A *.tmp is a write that never committed (the job died mid-write): never valid, safe to drop.
    for (const auto& entry : fs::directory_iterator(directory_)) {
      if (entry.path().extension() != ".tmp") continue;
      spdlog::warn("removing '{}', left by a checkpoint write that did not finish", entry.path().string());
      fs::remove(entry.path(), error);
    }
  });
}

std::string CheckpointManager::file_name(std::int64_t step) {
  return fmt::format("{}{:08d}{}", kPrefix, step, kSuffix);
}

std::vector<std::string> CheckpointManager::committed() const { return committed_in(directory_); }

std::vector<std::string> CheckpointManager::committed_in(const std::string& directory) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (is_committed_name(entry.path().filename().string())) paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());  // zero-padded steps sort numerically
  return paths;
}

std::string CheckpointManager::save(std::int64_t step, std::uint64_t expected_bytes,
                                    const std::function<void(ParallelCheckpointWriter&)>& write, MpiComm& comm) {
  const std::string final_path = (fs::path(directory_) / file_name(step)).string();
  const std::string temp_path = final_path + ".tmp";

  // 0. Room for it? Metadata and alignment add a little; 10% and 4 MiB cover both.
  on_root_then_agree(comm, [&] {
    std::error_code error;
    const auto space = fs::space(directory_, error);
    const std::uint64_t needed = expected_bytes + expected_bytes / 10 + (4u << 20);
    if (!error && space.available < needed)
      throw Error(
          fmt::format("checkpoint of step {} not written: '{}' has {:.1f} MB free and the checkpoint needs "
                      "about {:.1f} MB; the earlier checkpoints and 'latest' are intact (free space, lower "
                      "--keep-last, or move --checkpoint-dir)",
                      step, directory_, static_cast<double>(space.available) / 1e6, static_cast<double>(needed) / 1e6));
  });

  // 1. Every rank writes its share into the temporary file, which is closed collectively.
  std::optional<Failure> failure = capture_failure([&] {
    ParallelCheckpointWriter writer(comm, comm.handle(), temp_path);
    write(writer);
    writer.close();
  });
  // 2. Barrier and verdict: all ranks must have succeeded before anything is renamed.
  try {
    agree_on_failure(comm, failure);
  } catch (const Error& e) {
    if (comm.is_root()) {
      std::error_code ignored;
      fs::remove(temp_path, ignored);
    }
    throw Error(fmt::format("checkpoint of step {} not written ({}); the earlier checkpoints and 'latest' are intact",
                            step, e.what()),
                e.exit_code(), /*collective=*/true);
  }
  // 3. Root publishes: rename, sync the directory, then point `latest` at it the same way.
  on_root_then_agree(comm, [&] {
    rename_durably(temp_path, final_path, directory_);
    const std::string latest = (fs::path(directory_) / kLatest).string();
    {
      std::ofstream out(latest + ".tmp", std::ios::trunc);
      out << file_name(step) << '\n';
      if (!out.flush()) throw Error(fmt::format("cannot write '{}.tmp': {}", latest, std::strerror(errno)));
    }
    rename_durably(latest + ".tmp", latest, directory_);
    auto all = committed();
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last_) < all.size(); ++i) {
      std::error_code ignored;
      fs::remove(all[i], ignored);
    }
  });
  return final_path;
}

std::string CheckpointManager::resolve_resume(Communicator& comm, const std::string& directory,
                                              const ResumeFrom& resume) {
  std::string chosen;
  on_root_then_agree(comm, [&] {
    using Mode = ResumeFrom::Mode;
    if (resume.mode == Mode::None || (resume.mode == Mode::Auto && directory.empty())) return;
    std::string why;
    if (resume.mode == Mode::Path) {
      if (!verifies(resume.path, why)) throw UsageError(fmt::format("--resume: {}", why));
      chosen = resume.path;
      return;
    }
    // Newest first: `latest` names it; the directory listing covers a `latest` that is missing or stale.
    std::vector<std::string> candidates = committed_in(directory);
    std::reverse(candidates.begin(), candidates.end());
    std::ifstream latest_file(fs::path(directory) / kLatest);
    std::string latest_name;
    if (latest_file >> latest_name) {
      const std::string latest_path = (fs::path(directory) / latest_name).string();
      candidates.erase(std::remove(candidates.begin(), candidates.end(), latest_path), candidates.end());
      candidates.insert(candidates.begin(), latest_path);
    }
    for (const auto& candidate : candidates) {
      if (verifies(candidate, why)) {
        chosen = candidate;
        return;
      }
      // Set aside, not deleted: kept for a post-mortem, never chosen (or overwritten) again.
      const std::string kept = candidate + ".corrupt";
      std::error_code error;
      fs::rename(candidate, kept, error);
      spdlog::warn("checkpoint '{}' is not usable ({}); {}; trying an older one", candidate, why,
                   error ? "left in place" : fmt::format("renamed to '{}'", kept));
    }
  });
  broadcast_string(comm, chosen, 0);
  return chosen;
}

}  // namespace mnddp
