// Exclusive temporaries, atomic replacement, and which leftovers are ours to sweep.
#include "mnddp/safe_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "mnddp/error.hpp"

namespace fs = std::filesystem;

namespace mnddp {
namespace {

// When this process started, as the file system's clock sees it: static initialisation runs first.
const auto g_started = fs::file_time_type::clock::now();

void sync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) throw Error(fmt::format("fsync of '{}' failed: {}", path, std::strerror(errno)));
}

void sync_directory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}' to sync it: {}", directory, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("fsync of '{}' failed: {}", directory, std::strerror(saved)));
}

}  // namespace

std::string temporary_path(const std::string& directory, const std::string& name) {
  static thread_local std::mt19937_64 random{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()) << 32};
  return (fs::path(directory) / fmt::format("{}.{:016x}.tmp", name, random())).string();
}

bool is_temporary_of(const std::string& file_name, const std::string& name) {
  if (file_name == name + ".tmp") return true;
  if (file_name.size() != name.size() + 1 + 16 + 4 || file_name.compare(0, name.size() + 1, name + ".") != 0 ||
      !file_name.ends_with(".tmp"))
    return false;
  for (std::size_t i = name.size() + 1; i < name.size() + 17; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(file_name[i]))) return false;
  return true;
}

bool older_than_this_process(const std::string& path) {
  std::error_code error;
  const auto written = fs::last_write_time(fs::symlink_status(path, error).type() == fs::file_type::symlink
                                               ? fs::path()  // a symlink is never ours
                                               : fs::path(path),
                                           error);
  return !error && written < g_started;
}

void replace_file(const std::string& directory, const std::string& name, const std::string& contents) {
  const std::string target = (fs::path(directory) / name).string();
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temporary = temporary_path(directory, name);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw Error(fmt::format("cannot create a temporary for '{}': {}", target, std::strerror(errno)));
  try {
    std::size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(fmt::format("cannot write '{}': {}", temporary, std::strerror(errno)));
      done += static_cast<std::size_t>(n);
    }
    sync_fd(fd, temporary);
    ::close(fd);
    fd = -1;
    // rename() replaces `target` itself, a symlink included: never what a symlink points to.
    if (std::rename(temporary.c_str(), target.c_str()) != 0)
      throw Error(fmt::format("cannot rename '{}' to '{}': {}", temporary, target, std::strerror(errno)));
    sync_directory(directory);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

}  // namespace mnddp
