// The job's end: parsing --deadline and Slurm's answers.
#include "mnddp/job_deadline.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "mnddp/error.hpp"
#include "mnddp/run_program.hpp"

namespace mnddp {
namespace {

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace

namespace {

// A run of decimal digits at `at` (with a fraction ".ddd" where `fraction`), as a number and the index
// just past it; nothing when there is no digit there.
struct Scanned {
  double value = 0.0;
  std::size_t end = 0;
};
std::optional<Scanned> scan_number(const std::string& text, std::size_t at, bool fraction) {
  std::size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == at) return std::nullopt;
  if (fraction && end < text.size() && text[end] == '.') {
    std::size_t after = end + 1;
    while (after < text.size() && std::isdigit(static_cast<unsigned char>(text[after]))) ++after;
    if (after == end + 1) return std::nullopt;  // "1." is no number
    end = after;
  }
  return Scanned{std::strtod(text.substr(at, end - at).c_str(), nullptr), end};
}

// A number followed by `unit` at `at`; `at` moves past both when it is there.
std::optional<double> scan_unit(const std::string& text, std::size_t& at, char unit) {
  const auto number = scan_number(text, at, /*fraction=*/false);
  if (!number || number->end >= text.size() || text[number->end] != unit) return std::nullopt;
  at = number->end + 1;
  return number->value;
}

// 3600, 90s, 45m, 2h, 1h30m, 1h30m15s; after hours or minutes, seconds need their "s" ("1h30" is
// refused: did it mean minutes?).
std::optional<double> parse_units(const std::string& text) {
  std::size_t at = 0;
  const auto hours = scan_unit(text, at, 'h');
  const auto minutes = scan_unit(text, at, 'm');
  const auto seconds = scan_number(text, at, /*fraction=*/true);
  bool has_s = false;
  if (seconds) {
    at = seconds->end;
    has_s = at < text.size() && text[at] == 's';
    if (has_s) ++at;
  }
  if (at != text.size() || !(hours || minutes || seconds)) return std::nullopt;
  if (seconds && (hours || minutes) && !has_s) return std::nullopt;
  return 3600.0 * hours.value_or(0.0) + 60.0 * minutes.value_or(0.0) + (seconds ? seconds->value : 0.0);
}

// Slurm's forms: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
std::optional<double> parse_clock(const std::string& text) {
  std::size_t at = 0;
  const auto days = scan_unit(text, at, '-');
  std::array<double, 3> parts{};
  int n = 0;
  while (n < 3) {
    const auto part = scan_number(text, at, /*fraction=*/false);
    if (!part) return std::nullopt;
    parts[static_cast<std::size_t>(n++)] = part->value;
    at = part->end;
    if (at == text.size() || text[at] != ':') break;
    ++at;
  }
  if (at != text.size() || !(days || n >= 2)) return std::nullopt;
  double hms = 0.0;
  if (days)  // D-HH[:MM[:SS]]
    hms = 3600.0 * parts[0] + 60.0 * parts[1] + parts[2];
  else if (n == 2)  // MM:SS
    hms = 60.0 * parts[0] + parts[1];
  else  // HH:MM:SS
    hms = 3600.0 * parts[0] + 60.0 * parts[1] + parts[2];
  return 86400.0 * days.value_or(0.0) + hms;
}

// Longer than any duration anyone writes: refused before it is scanned (the scanners are linear, but
// a bounded input keeps every number finite and every message short).
constexpr std::size_t kLongestDuration = 64;
// Ten years: past it a deadline is a typo, and below it every value prints as plain digits.
constexpr double kLongestDeadline = 10 * 365.25 * 86400;

}  // namespace

std::optional<double> parse_duration(const std::string& raw) {
  if (raw.size() > 4 * kLongestDuration) return std::nullopt;
  const std::string text = trimmed(raw);
  if (text.empty() || text.size() > kLongestDuration) return std::nullopt;
  if (const auto seconds = parse_units(text)) return seconds;
  return parse_clock(text);
}

DeadlineRequest parse_deadline(const std::string& text) {
  if (text == "auto") return {DeadlineRequest::Mode::Auto, 0.0};
  if (text == "none") return {DeadlineRequest::Mode::None, 0.0};
  const auto seconds = parse_duration(text);
  if (!seconds || *seconds < 1.0 || *seconds > kLongestDeadline)
    throw UsageError(
        fmt::format("--deadline: '{}' is not auto, none or a duration from 1 s to 10 years (3600, 90s, 45m, "
                    "2h, 1h30m, HH:MM:SS, D-HH:MM:SS)",
                    text.size() > kLongestDuration ? text.substr(0, kLongestDuration) + "..." : text));
  return {DeadlineRequest::Mode::After, *seconds};
}

std::string format_deadline(const DeadlineRequest& request) {
  switch (request.mode) {
    case DeadlineRequest::Mode::Auto:
      return "auto";
    case DeadlineRequest::Mode::None:
      return "none";
    case DeadlineRequest::Mode::After:
      // The shortest text that reads back as the same double (never "1.2096e+06"): within the
      // accepted range, plain digits.
      return fmt::format("{}s", request.seconds);
  }
  return "auto";
}

std::optional<std::time_t> parse_slurm_time(const std::string& raw) {
  if (raw.size() > 4 * kLongestDuration) return std::nullopt;
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

std::string run_command(const std::vector<std::string>& argv) {
  // Bounded: a slow or absent controller must not hold up the start of training.
  const ProgramResult result = run_program(argv, 10.0);
  return result.timed_out ? std::string() : result.output;
}

std::optional<JobEnd> find_job_end(const DeadlineRequest& request, const Environment& env, const CommandRunner& run,
                                   std::time_t now) {
  if (request.mode == DeadlineRequest::Mode::None) return std::nullopt;
  if (request.mode == DeadlineRequest::Mode::After)
    return JobEnd{request.seconds, fmt::format("--deadline {}", format_deadline(request))};
  const auto job = env_value(env, "SLURM_JOB_ID");
  if (!job || job->empty() || job->find_first_not_of("0123456789_") != std::string::npos) return std::nullopt;
  auto left = [&](std::time_t end) { return static_cast<double>(end) - static_cast<double>(now); };
  // An end further away than --deadline accepts (10 years, ahead or, for a garbled year, behind) is
  // no deadline: counted in the clock's nanoseconds it would overflow.
  auto within_reach = [&](std::time_t end) { return std::abs(left(end)) <= kLongestDeadline; };
  // squeue and scontrol see a time limit changed after the start; the environment does not.
  if (const auto end = parse_slurm_time(run({"squeue", "-h", "-j", *job, "-o", "%e"})))
    return within_reach(*end) ? std::optional(JobEnd{left(*end), "squeue"}) : std::nullopt;
  const std::string shown = run({"scontrol", "show", "job", *job});
  if (const auto at = shown.find("EndTime="); at != std::string::npos) {
    const auto from = at + 8;
    const auto to = shown.find_first_of(" \t\r\n", from);
    if (const auto end = parse_slurm_time(shown.substr(from, to == std::string::npos ? to : to - from)))
      return within_reach(*end) ? std::optional(JobEnd{left(*end), "scontrol"}) : std::nullopt;
  }
  if (const auto end = env_int(env, "SLURM_JOB_END_TIME"); end && *end > 0)
    return within_reach(static_cast<std::time_t>(*end))
               ? std::optional(JobEnd{left(static_cast<std::time_t>(*end)), "SLURM_JOB_END_TIME"})
               : std::nullopt;
  return std::nullopt;
}

}  // namespace mnddp
