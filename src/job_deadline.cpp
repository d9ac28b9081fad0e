// The job's end: parsing --deadline and Slurm's answers.
#include "mnddp/job_deadline.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <memory>
#include <regex>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace

std::optional<double> parse_duration(const std::string& raw) {
  const std::string text = trimmed(raw);
  std::smatch m;
  // 3600, 90s, 45m, 2h, 1h30m, 1h30m15s
  static const std::regex units(R"((?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?)");
  if (!text.empty() && std::regex_match(text, m, units) && (m[1].matched || m[2].matched || m[3].matched)) {
    // A bare number is seconds; after hours or minutes, seconds need their "s" ("1h30" is refused:
    // did it mean minutes?).
    if (m[3].matched && (m[1].matched || m[2].matched) && text.back() != 's') return std::nullopt;
    double seconds = 0.0;
    if (m[1].matched) seconds += 3600.0 * std::stod(m[1]);
    if (m[2].matched) seconds += 60.0 * std::stod(m[2]);
    if (m[3].matched) seconds += std::stod(m[3]);
    return seconds;
  }
  // Slurm's forms: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
  static const std::regex clock(R"((?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?)");
  if (std::regex_match(text, m, clock) && (m[1].matched || m[3].matched)) {
    const double days = m[1].matched ? std::stod(m[1]) : 0.0;
    std::array<double, 3> parts{};
    int n = 0;
    for (int i = 2; i <= 4; ++i)
      if (m[i].matched) parts[static_cast<std::size_t>(n++)] = std::stod(m[i]);
    double hms = 0.0;
    if (m[1].matched)  // D-HH[:MM[:SS]]
      hms = 3600.0 * parts[0] + 60.0 * parts[1] + parts[2];
    else if (n == 2)  // MM:SS
      hms = 60.0 * parts[0] + parts[1];
    else  // HH:MM:SS
      hms = 3600.0 * parts[0] + 60.0 * parts[1] + parts[2];
    return 86400.0 * days + hms;
  }
  return std::nullopt;
}

DeadlineRequest parse_deadline(const std::string& text) {
  if (text == "auto") return {DeadlineRequest::Mode::Auto, 0.0};
  if (text == "none") return {DeadlineRequest::Mode::None, 0.0};
  const auto seconds = parse_duration(text);
  if (!seconds || *seconds <= 0)
    throw UsageError(
        fmt::format("--deadline: '{}' is not auto, none or a positive duration (3600, 90s, 45m, 2h, "
                    "1h30m, HH:MM:SS, D-HH:MM:SS)",
                    text));
  return {DeadlineRequest::Mode::After, *seconds};
}

std::string format_deadline(const DeadlineRequest& request) {
  switch (request.mode) {
    case DeadlineRequest::Mode::Auto:
      return "auto";
    case DeadlineRequest::Mode::None:
      return "none";
    case DeadlineRequest::Mode::After:
      return fmt::format("{:g}s", request.seconds);
  }
  return "auto";
}

std::optional<std::time_t> parse_slurm_time(const std::string& raw) {
  const std::string text = trimmed(raw);
  static const std::regex stamp(R"((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2}))");
  std::smatch m;
  if (!std::regex_match(text, m, stamp)) return std::nullopt;
  std::tm t{};
  t.tm_year = std::stoi(m[1]) - 1900;
  t.tm_mon = std::stoi(m[2]) - 1;
  t.tm_mday = std::stoi(m[3]);
  t.tm_hour = std::stoi(m[4]);
  t.tm_min = std::stoi(m[5]);
  t.tm_sec = std::stoi(m[6]);
  t.tm_isdst = -1;  // Slurm prints the controller's local time
  const std::time_t when = std::mktime(&t);
  if (when == static_cast<std::time_t>(-1)) return std::nullopt;
  return when;
}

std::string run_command(const std::string& command) {
  // Bounded: a slow or absent controller must not hold up the start of training.
  const std::string bounded = "timeout 10 " + command + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(bounded.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) out.append(buffer.data(), n);
  return out;
}

std::optional<JobEnd> find_job_end(const DeadlineRequest& request, const Environment& env, const CommandRunner& run,
                                   std::time_t now) {
  if (request.mode == DeadlineRequest::Mode::None) return std::nullopt;
  if (request.mode == DeadlineRequest::Mode::After)
    return JobEnd{request.seconds, fmt::format("--deadline {}", format_deadline(request))};
  const auto job = env_value(env, "SLURM_JOB_ID");
  if (!job || job->empty() || job->find_first_not_of("0123456789_") != std::string::npos) return std::nullopt;
  auto left = [&](std::time_t end) { return static_cast<double>(end - now); };
  // squeue and scontrol see a time limit changed after the start; the environment does not.
  if (const auto end = parse_slurm_time(run(fmt::format("squeue -h -j {} -o %e", *job))))
    return JobEnd{left(*end), "squeue"};
  const std::string shown = run(fmt::format("scontrol show job {}", *job));
  static const std::regex end_time(R"(EndTime=(\S+))");
  std::smatch m;
  if (std::regex_search(shown, m, end_time))
    if (const auto end = parse_slurm_time(m[1])) return JobEnd{left(*end), "scontrol"};
  if (const auto end = env_int(env, "SLURM_JOB_END_TIME"); end && *end > 0)
    return JobEnd{left(static_cast<std::time_t>(*end)), "SLURM_JOB_END_TIME"};
  return std::nullopt;
}

}  // namespace mnddp
