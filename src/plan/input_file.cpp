// Reading the plan's input files: see input_file.hpp.
#include "mnddp/plan/input_file.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mnddp/error.hpp"

namespace mnddp {

std::string read_plan_input_file(const std::string& path, const std::string& what, std::uintmax_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) throw UsageError(fmt::format("{}: larger than {} MiB", what, max_bytes >> 20));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw UsageError(fmt::format("{}: cannot be read", what));
  return text.str();
}

}  // namespace mnddp
