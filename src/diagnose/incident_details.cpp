// How `mnddp incident` prints a rank: its state in a line; its threads with their activities and
// stacks; its last calls per channel. Frames without an exported name are named from the module's
// symbol table by addr2line, where the module is at hand.
#include "mnddp/diagnose/incident_details.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/incident_schema.hpp"
#include "mnddp/run_program.hpp"

namespace mnddp {
namespace {

using json = nlohmann::json;
constexpr std::size_t kFramesShown = 16;
constexpr std::size_t kCallsShown = 6;

using FrameKey = std::pair<std::string, std::uint64_t>;  // module, offset of the instruction

std::uint64_t parse_hex(const std::string& text) {
  try {
    return std::stoull(text, nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

// Innermost frames are the interrupted instruction; the rest are return addresses, one past the call.
FrameKey frame_key(const json& frame, std::size_t index) {
  const std::uint64_t offset = parse_hex(frame.value("offset", "0"));
  return {frame.value("module", ""), index == 0 || offset == 0 ? offset : offset - 1};
}

// Names for frames no exported symbol covers: one addr2line per module, bounded in time.
std::map<FrameKey, std::string> symbolise(const std::vector<FrameKey>& wanted) {
  std::map<std::string, std::set<std::uint64_t>> by_module;
  for (const auto& [module, offset] : wanted) {
    std::error_code error;
    if (!module.empty() && std::filesystem::is_regular_file(module, error)) by_module[module].insert(offset);
  }
  std::map<FrameKey, std::string> names;
  for (const auto& [module, offsets] : by_module) {
    // An argument vector, no shell: the module's path comes from the incident file. "--" ends the
    // options, so a path that starts with "-" is a path.
    std::vector<std::string> argv{"addr2line", "-f", "-C", "-e", module, "--"};
    for (auto offset : offsets) argv.push_back(fmt::format("{:#x}", offset));
    const ProgramResult result = run_program(argv, 30.0);
    if (!result.started || result.timed_out) continue;
    std::vector<std::string> lines;
    std::istringstream out(result.output);
    for (std::string line; std::getline(out, line);) lines.push_back(line);
    std::size_t i = 0;
    for (auto offset : offsets) {
      if (i + 1 >= lines.size()) break;
      const std::string& function = lines[i];
      const std::string& place = lines[i + 1];
      i += 2;
      if (function == "??") continue;
      names[{module, offset}] = place.starts_with("??") ? function : function + " at " + place;
    }
  }
  return names;
}

std::string frame_text(const json& frame, std::size_t index, const std::map<FrameKey, std::string>& names) {
  const auto key = frame_key(frame, index);
  std::string name = frame.value("symbol", "");
  if (auto it = names.find(key); it != names.end()) name = it->second;
  const std::string module = std::filesystem::path(key.first).filename().string();
  return fmt::format("      #{:<2} {} ({}+{})", index, name.empty() ? "??" : name, module.empty() ? "?" : module,
                     frame.value("offset", "?"));
}

std::string rank_line(int rank, const std::map<int, json>& by_rank, const json& origin) {
  auto it = by_rank.find(rank);
  if (it == by_rank.end()) {
    std::string seen;
    for (const auto& peer : origin.value("peers", json::array()))
      if (peer.value("rank", -1) == rank)
        seen = peer.value("answered", false)
                   ? fmt::format("; rank {} saw it: {}", origin.value("rank", -1), peer.value("where", ""))
                   : fmt::format("; it did not answer rank {}", origin.value("rank", -1));
    return fmt::format("  rank {}: no record{}", rank, seen);
  }
  const json& r = it->second;
  std::string cause = r.value("cause", "");
  if (cause == "request") cause = fmt::format("asked by rank {}", r.value("origin", -1));
  std::string channels;
  for (const auto& c : r.value("channels", json::array())) {
    if (field(c, "open").is_object())
      channels += fmt::format("; {}: in {} for {:.1f} s", c.value("channel", ""), describe_call(field(c, "open")),
                              field(c, "open").value("age_s", 0.0));
    else
      channels += fmt::format("; {}: {} calls done", c.value("channel", ""), c.value("finished", 0));
  }
  return fmt::format("  rank {} ({}, pid {}, {}): record '{}', step {}, {}{}", rank, r.value("host", "?"),
                     r.value("pid", 0), r.value("device", "?"), cause, r.value("step", 0), doing(r), channels);
}

std::string rank_details(const json& r, const std::map<FrameKey, std::string>& names) {
  std::string text = fmt::format("\nrank {} ({}, pid {}): reason given: {}\n  threads:\n", r.value("rank", -1),
                                 r.value("host", "?"), r.value("pid", 0), r.value("reason", ""));
  for (const auto& t : r.value("threads", json::array())) {
    std::string role = t.value("role", "");
    text += fmt::format("    thread {} '{}'{}{}{}{}\n", t.value("tid", 0), t.value("name", ""),
                        role.empty() ? "" : " (" + role + ")",
                        t.value("activity", "").empty()
                            ? ""
                            : fmt::format(": {} for {:.1f} s", t.value("activity", ""), t.value("activity_s", 0.0)),
                        t.value("crashed", false) ? "  <-- crashed here" : "",
                        t.value("answered", true) ? "" : "  (no stack: it did not answer)");
    const auto& frames = t.value("frames", json::array());
    for (std::size_t i = 0; i < frames.size() && i < kFramesShown; ++i) text += frame_text(frames[i], i, names) + "\n";
    if (frames.size() > kFramesShown) text += fmt::format("      ... {} more\n", frames.size() - kFramesShown);
  }
  const double when = r.value("time", 0.0);
  for (const auto& c : r.value("channels", json::array())) {
    const auto& history = c.value("history", json::array());
    if (history.empty()) continue;
    text += fmt::format("  last calls on the {} channel ({} started, {} finished):\n", c.value("channel", ""),
                        c.value("started", 0), c.value("finished", 0));
    for (std::size_t i = history.size() > kCallsShown ? history.size() - kCallsShown : 0; i < history.size(); ++i) {
      const json& call = history[i];
      const double start = call.value("start", 0.0);
      text += fmt::format("    {:<50} began {:.3f} s before the record, {}\n", describe_call(call), when - start,
                          field(call, "end").is_null()
                              ? "still open"
                              : fmt::format("took {:.3f} ms", (call.value("end", 0.0) - start) * 1e3));
    }
  }
  return text;
}

}  // namespace

std::string describe_call(const json& call) {
  const std::string label = call.value("label", "");
  return fmt::format("{} #{} ({}{}{})", call.value("op", "?"), call.value("seq", 0),
                     human_bytes(call.value("bytes", std::size_t{0})), label.empty() ? "" : ", ", label);
}

std::string doing(const json& record) {
  std::string main = "outside any named activity";
  std::vector<std::string> others;
  for (const auto& t : record.value("threads", json::array())) {
    const std::string what = t.value("activity", "");
    if (t.value("role", "") == "main") {
      if (!what.empty()) main = fmt::format("in {} for {:.1f} s", what, t.value("activity_s", 0.0));
      if (what.empty() && !t.value("unwound", "").empty())
        main = fmt::format("in {} (where the error arose)", t.value("unwound", ""));
    } else if (!what.empty()) {
      others.push_back(fmt::format("{}: {} for {:.1f} s", t.value("role", "thread"), what, t.value("activity_s", 0.0)));
    }
  }
  return others.empty() ? main : fmt::format("{} ({})", main, fmt::join(others, "; "));
}

std::string describe_ranks(const std::map<int, json>& by_rank, int world, const json& origin,
                           const std::vector<int>& shown) {
  std::string text = "ranks:\n";
  for (int r = 0; r < world; ++r) text += rank_line(r, by_rank, origin) + "\n";
  std::vector<FrameKey> wanted;
  for (int r : shown) {
    auto it = by_rank.find(r);
    if (it == by_rank.end()) continue;
    for (const auto& t : it->second.value("threads", json::array())) {
      const auto& frames = t.value("frames", json::array());
      for (std::size_t i = 0; i < frames.size() && i < kFramesShown; ++i) wanted.push_back(frame_key(frames[i], i));
    }
  }
  const auto names = symbolise(wanted);
  for (int r : shown)
    if (auto it = by_rank.find(r); it != by_rank.end()) text += rank_details(it->second, names);
  return text;
}

}  // namespace mnddp
