// Shared test helpers.
#include "test_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <random>

namespace mnddp::testing_support {

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::random_device entropy;
  path_ = std::filesystem::path(base ? base : "/tmp") /
          (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(entropy()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace mnddp::testing_support
