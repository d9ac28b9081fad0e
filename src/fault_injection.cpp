// Parsing of --inject-fault specs.
#include "mnddp/fault_injection.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <regex>

#include "mnddp/error.hpp"

namespace mnddp {

FaultPlan parse_fault_plan(const std::string& spec) {
  if (spec.empty()) return {};
  static const std::regex kForm(R"(([a-z-]+)@([0-9]+)(:([0-9]+))?)");
  static const std::array<const char*, 3> kKinds = {"checkpoint-kill", "checkpoint-fail", "checkpoint-fill"};
  std::smatch match;
  if (!std::regex_match(spec, match, kForm))
    throw UsageError(fmt::format("--inject-fault: '{}' is not KIND@STEP[:RANK] (e.g. checkpoint-kill@20)", spec));
  FaultPlan plan;
  plan.kind = match[1];
  plan.step = std::stoll(match[2]);
  if (match[4].matched) plan.rank = std::stoi(match[4]);
  bool known = false;
  for (const char* kind : kKinds) known = known || plan.kind == kind;
  if (!known)
    throw UsageError(
        fmt::format("--inject-fault: unknown fault '{}' (choose from {})", plan.kind, fmt::join(kKinds, ", ")));
  return plan;
}

void fill_file_system(const std::string& directory) {
  const std::string path = directory + "/injected-fill";
  std::error_code error;
  const auto space = std::filesystem::space(directory, error);
  if (error) return;
  // Leave a sliver, so the checkpoint's file creation and first metadata succeed and a data write fails.
  const std::uintmax_t keep = 64u << 10;
  if (space.available <= keep) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return;
  (void)::posix_fallocate(fd, 0, static_cast<off_t>(space.available - keep));  // a racing rank may get ENOSPC
  ::close(fd);
}

}  // namespace mnddp
