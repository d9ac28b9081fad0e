// Shared test helpers: scratch directories that clean up after themselves.
#pragma once

#include <filesystem>
#include <string>

namespace mnddp::testing_support {

// A fresh directory under $TMPDIR (or /tmp), removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "mnddp-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace mnddp::testing_support
