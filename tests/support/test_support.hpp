// Shared test helpers: scratch directories that clean up after themselves, and the message of an
// expected UsageError.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "mnddp/error.hpp"

namespace mnddp::testing_support {

// The message of the UsageError that `run` throws (its exit code checked: 2), or "" when it
// throws none.
template <typename F>
std::string usage_error_or_empty(F&& run) {
  try {
    run();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return {};
}

// The same where an error is expected: a test failure when `run` throws none.
template <typename F>
std::string usage_error_of(F&& run) {
  std::string message = usage_error_or_empty(std::forward<F>(run));
  if (message.empty()) ADD_FAILURE() << "no UsageError thrown";
  return message;
}

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
