// Atomic checkpoint commit, retention and resume selection.
#include "mnddp/ckpt/checkpoint_manager.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mnddp/ckpt/parallel_verify.hpp"
#include "mnddp/error.hpp"
#include "mnddp/observe/timeline.hpp"
#include "mnddp/safe_files.hpp"

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

// "step-<digits>.h5", nothing else: what `latest` may name and what retention may remove.
bool is_committed_name(const std::string& name) {
  const std::size_t prefix = std::strlen(kPrefix);
  const std::size_t suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.size() > prefix + suffix + 18 || name.rfind(kPrefix, 0) != 0 ||
      !name.ends_with(kSuffix))
    return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix),
                     name.end() - static_cast<std::ptrdiff_t>(suffix), [](char c) { return c >= '0' && c <= '9'; });
}

// The names mnddp replaces through a temporary in a checkpoint directory.
constexpr const char* kReplacedFiles[] = {"latest", "best.h5", "best.json", "stop-reason"};

// A temporary mnddp made in a checkpoint directory ("step-00000012.h5.<random>.tmp",
// "latest.<random>.tmp", or the fixed "*.tmp" of earlier versions): nothing else is swept.
bool is_our_temporary(const std::string& name) {
  for (const char* replaced : kReplacedFiles)
    if (is_temporary_of(name, replaced)) return true;
  const std::size_t end = name.find(kSuffix);
  return end != std::string::npos && is_committed_name(name.substr(0, end + std::strlen(kSuffix))) &&
         is_temporary_of(name, name.substr(0, end + std::strlen(kSuffix)));
}

// The committed checkpoint `latest` names, or "" (with a warning) when its content is anything but
// a committed file name: never a path, so it cannot lead outside the directory.
std::string read_latest(const std::string& directory) {
  std::ifstream in(fs::path(directory) / kLatest);
  std::string name;
  if (!(in >> name)) return {};
  if (fs::path(name).filename().string() == name && is_committed_name(name)) return name;
  spdlog::warn("'{}/latest' names '{}', which is not a checkpoint file name of this directory; it is ignored",
               directory, name.substr(0, 200));
  return {};
}

// The step in a committed name ("step-00000120.h5" -> 120).
std::int64_t step_of(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  return std::stoll(name.substr(std::strlen(kPrefix), name.size() - std::strlen(kPrefix) - std::strlen(kSuffix)));
}

// Points `latest` at `name` (write and rename, durably); an empty name removes it.
void write_latest(const std::string& directory, const std::string& name) {
  const std::string latest = (fs::path(directory) / kLatest).string();
  if (name.empty()) {
    std::error_code ignored;
    fs::remove(latest, ignored);
    return;
  }
  replace_file(directory, kLatest, name + '\n');
}

// `path` + `suffix`, or with ".1", ".2", ... added where that name is taken: never overwrite a kept file.
std::string free_name(const std::string& path, const std::string& suffix) {
  std::string candidate = path + suffix;
  std::error_code ignored;
  for (int n = 1; fs::exists(candidate, ignored); ++n) candidate = fmt::format("{}{}.{}", path, suffix, n);
  return candidate;
}

// Resuming from step `step`: the committed checkpoints after it belong to a run that went on from
// there, and this run is about to write its own steps beside them. Set them aside (renamed, so
// neither retention nor --resume auto picks them up again) and point `latest` at what remains.
void set_aside_newer_than(const std::string& directory, std::int64_t step) {
  std::vector<std::string> kept_as;
  std::vector<std::string> remaining;
  for (const auto& path : CheckpointManager::committed_in(directory)) {
    if (step_of(path) <= step) {
      remaining.push_back(path);
      continue;
    }
    const std::string target = free_name(path, ".abandoned");
    std::error_code error;
    fs::rename(path, target, error);
    if (error)
      throw Error(
          fmt::format("--resume: cannot set aside '{}', newer than the checkpoint resumed: {}", path, error.message()));
    kept_as.push_back(fs::path(target).filename().string());
  }
  if (kept_as.empty()) return;
  sync_path(directory);
  write_latest(directory, remaining.empty() ? std::string() : fs::path(remaining.back()).filename().string());
  spdlog::warn(
      "resuming from step {}: the newer checkpoints in '{}' were set aside as {} (the run that wrote them "
      "is abandoned; --resume auto continues this one)",
      step, directory, fmt::join(kept_as, ", "));
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, int keep_last, Communicator& comm)
    : directory_(std::move(directory)), keep_last_(keep_last) {
  on_root_then_agree(comm, [&] {
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error || !fs::is_directory(directory_))
      throw UsageError(fmt::format("--checkpoint-dir: cannot create '{}': {}", directory_, error.message()));
    // mnddp's own temporaries from before this process are writes that never committed (the job
    // died mid-write): never valid, safe to drop. Anything else is not ours to remove, and a
    // temporary written since this process started is a live writer's.
    for (const auto& entry : fs::directory_iterator(directory_)) {
      const std::string name = entry.path().filename().string();
      if (!is_our_temporary(name) || !entry.is_regular_file(error) || !older_than_this_process(entry.path())) continue;
      spdlog::warn("removing '{}', left by a checkpoint write that did not finish", entry.path().string());
      fs::remove(entry.path(), error);
    }
  });
}

std::string CheckpointManager::file_name(std::int64_t step) {
  return fmt::format("{}{:08d}{}", kPrefix, step, kSuffix);
}

std::string CheckpointManager::keep_as_best(const std::string& committed, const std::string& metric, double value,
                                            std::int64_t step) const {
  const std::string best = (fs::path(directory_) / kBestFile).string();
  // A fresh, unguessable name: both a hard link and copy_file without overwrite refuse one that exists.
  const std::string temporary = temporary_path(directory_, kBestFile);
  std::error_code error;
  fs::create_hard_link(committed, temporary, error);
  if (error) {  // no hard links here (some parallel file systems): a copy, synced by the rename
    fs::copy_file(committed, temporary, fs::copy_options::none, error);
    if (error) {
      std::error_code ignored;
      if (fs::symlink_status(temporary, ignored).type() == fs::file_type::regular) fs::remove(temporary, ignored);
      throw Error(fmt::format("--keep-best: cannot copy '{}' to '{}': {}", committed, temporary, error.message()));
    }
  }
  rename_durably(temporary, best, directory_);
  replace_file(
      directory_, "best.json",
      nlohmann::json{
          {"metric", metric}, {"value", value}, {"step", step}, {"checkpoint", fs::path(committed).filename().string()}}
              .dump() +
          '\n');
  return best;
}

std::optional<CheckpointManager::Best> CheckpointManager::read_best(const std::string& directory,
                                                                    const std::string& metric) {
  std::ifstream in(fs::path(directory) / "best.json");
  if (!in || !fs::exists(fs::path(directory) / kBestFile)) return std::nullopt;
  const nlohmann::json record = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object() || record.value("metric", "") != metric || !record.contains("value") ||
      !record["value"].is_number() || !record.contains("step"))
    return std::nullopt;
  return Best{record["value"].get<double>(), record["step"].get<std::int64_t>()};
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
  // A unique temporary, created exclusively: never a file or symlink someone left under that name.
  std::string temp_path = comm.is_root() ? temporary_path(directory_, file_name(step)) : std::string();
  broadcast_string(comm, temp_path, 0);
  const timeline::ScopedSpan span(
      "checkpoint", timeline::enabled() ? fmt::format("checkpoint commit (step {})", step) : std::string());

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

  // 1. Every rank writes its share into the temporary file, which is closed collectively. Its
  // phases are records on `comm`'s channel, named for the watchdog's verdict.
  const CollectiveLabel label(fmt::format("checkpoint write of step {}", step));
  std::optional<Failure> failure = capture_failure([&] {
    ParallelCheckpointWriter writer(comm, comm.handle(), temp_path, ParallelCheckpointWriter::Create::Exclusive);
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
    write_latest(directory_, file_name(step));
    // Retention: the oldest go first, and never the checkpoint just committed (which `latest` names).
    auto all = committed();
    std::size_t count = all.size();
    for (std::size_t i = 0; i < all.size() && count > static_cast<std::size_t>(keep_last_); ++i) {
      if (all[i] == final_path) continue;
      std::error_code ignored;
      fs::remove(all[i], ignored);
      --count;
    }
  });
  return final_path;
}

void CheckpointManager::set_aside_newer(Communicator& comm, const std::string& directory, std::int64_t step) {
  on_root_then_agree(comm, [&] {
    if (!directory.empty() && fs::is_directory(directory)) set_aside_newer_than(directory, step);
  });
}

std::string CheckpointManager::resolve_resume(Communicator& comm, const std::string& directory,
                                              const ResumeFrom& resume) {
  using Mode = ResumeFrom::Mode;
  if (resume.mode == Mode::None || (resume.mode == Mode::Auto && directory.empty())) return {};
  // Rank 0 lists the candidates, newest first: `latest` names it; the directory listing covers a
  // `latest` that is missing or stale.
  std::vector<std::string> candidates;
  on_root_then_agree(comm, [&] {
    if (resume.mode == Mode::Path) {
      candidates = {resume.path};
      return;
    }
    candidates = committed_in(directory);
    std::reverse(candidates.begin(), candidates.end());
    const std::string latest_name = read_latest(directory);
    if (!latest_name.empty()) {
      const std::string latest_path = (fs::path(directory) / latest_name).string();
      candidates.erase(std::remove(candidates.begin(), candidates.end(), latest_path), candidates.end());
      candidates.insert(candidates.begin(), latest_path);
    }
  });
  std::int64_t count = static_cast<std::int64_t>(candidates.size());
  comm.broadcast(&count, 1, DType::I64, 0);
  candidates.resize(static_cast<std::size_t>(count));
  for (auto& candidate : candidates) broadcast_string(comm, candidate, 0);

  for (const auto& candidate : candidates) {
    std::int64_t exists = 1;
    if (comm.is_root() && resume.mode == Mode::Auto) {
      std::error_code missing;
      exists = fs::exists(candidate, missing) ? 1 : 0;
      if (!exists) spdlog::warn("'latest' names '{}', which does not exist; trying the others", candidate);
    }
    comm.broadcast(&exists, 1, DType::I64, 0);
    if (!exists) continue;
    // Every rank reads its share of the file: the whole job reads it once.
    const CheckpointVerdict verdict = verify_checkpoint_in_parallel(comm, candidate);
    switch (verdict.kind) {
      case CheckpointVerdict::Kind::Good:
        return candidate;
      case CheckpointVerdict::Kind::Corrupt:
        if (resume.mode == Mode::Path) throw UsageError(fmt::format("--resume: {}", verdict.message), true);
        on_root_then_agree(comm, [&] {
          // Set aside, not deleted: kept for a post-mortem, never chosen (or overwritten) again.
          const std::string kept = free_name(candidate, ".corrupt");
          std::error_code error;
          fs::rename(candidate, kept, error);
          spdlog::warn("checkpoint '{}' is not usable ({}); {}; trying an older one", candidate, verdict.message,
                       error ? "left in place" : fmt::format("renamed to '{}'", kept));
        });
        continue;
      case CheckpointVerdict::Kind::Unreadable:
        if (resume.mode == Mode::Path) throw UsageError(fmt::format("--resume: {}", verdict.message), true);
        // The file may be fine and the storage not (EIO, EACCES, a mount gone): stop, touch nothing.
        throw Error(fmt::format("--resume auto: {}; the checkpoint was left as it is (fix the storage or its "
                                "permissions and run again, or pass --resume with an older checkpoint)",
                                verdict.message),
                    kExitFailure, /*collective=*/true);
    }
  }
  return {};
}

}  // namespace mnddp
