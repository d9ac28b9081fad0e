// From the ranks' incident records to one verdict: which rank the others waited for, and what it was
// doing. The records agree on the stuck call (the watchdog's, or the call every survivor waited in);
// a rank behind it, or one that never wrote a record, is the culprit.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "mnddp/diagnose/incident_command.hpp"
#include "mnddp/diagnose/incident_details.hpp"
#include "mnddp/diagnose/incident_schema.hpp"

namespace mnddp {
namespace {

using json = nlohmann::json;

// How strongly a record's cause explains the incident: the rank it happened to first.
int weight(const std::string& cause) {
  if (cause == "crash") return 5;
  if (cause == "fatal") return 4;
  if (cause == "error") return 3;
  if (cause == "timeout") return 2;
  if (cause == "signal") return 1;
  return 0;  // "request": written because another rank asked
}

struct Call {
  std::string channel;
  std::uint64_t seq = 0;
  std::string what;
};

// The stuck call: the watchdog's, else the oldest open lockstep call the signalled ranks share.
std::optional<Call> stuck_call(const std::map<int, json>& by_rank, const json& origin) {
  if (origin.contains("stuck") && field(origin, "stuck").is_object())
    return Call{field(origin, "stuck").value("channel", ""), field(origin, "stuck").value("seq", std::uint64_t{0}),
                field(origin, "stuck").value("what", "")};
  std::optional<Call> oldest;
  double age = -1.0;
  for (const auto& [rank, record] : by_rank) {
    for (const auto& channel : record.value("channels", json::array())) {
      if (channel.value("pace", "") != "lockstep" || !field(channel, "open").is_object()) continue;
      const json& open = field(channel, "open");
      if (open.value("age_s", 0.0) <= age) continue;
      age = open.value("age_s", 0.0);
      oldest = Call{channel.value("channel", ""), open.value("seq", std::uint64_t{0}), describe_call(open)};
    }
  }
  return oldest;
}

// Where a rank stands against the stuck call: from its own record, else from what the origin saw.
std::string state_of(int rank, const std::map<int, json>& by_rank, const json& origin, const Call& call) {
  if (auto it = by_rank.find(rank); it != by_rank.end()) {
    for (const auto& channel : it->second.value("channels", json::array())) {
      if (channel.value("channel", "") != call.channel) continue;
      const auto started = channel.value("started", std::uint64_t{0});
      const auto finished = channel.value("finished", std::uint64_t{0});
      if (started < call.seq) return "behind";
      if (field(channel, "open").is_object() && field(channel, "open").value("seq", std::uint64_t{0}) == call.seq)
        return "inside";
      if (finished >= call.seq) return "ahead";
      return "inside";
    }
    return "behind";  // never used the channel
  }
  for (const auto& peer : origin.value("peers", json::array()))
    if (peer.value("rank", -1) == rank) return peer.value("state", "silent");
  return "silent";
}

// When each rank began the call, from the histories (wall-clock seconds); absent where it did not.
std::map<int, double> call_starts(const std::map<int, json>& by_rank, const Call& call) {
  std::map<int, double> starts;
  for (const auto& [rank, record] : by_rank)
    for (const auto& channel : record.value("channels", json::array()))
      if (channel.value("channel", "") == call.channel)
        for (const auto& entry : channel.value("history", json::array()))
          if (entry.value("seq", std::uint64_t{0}) == call.seq) starts[rank] = entry.value("start", 0.0);
  return starts;
}

// The lockstep call a rank is inside on another channel than `call`'s, when another rank with a
// record has already finished it: the rank waits there on a peer that left it half done (a rank that
// died in the middle of it, typically), so it is a waiter, not a rank that never came.
std::optional<Call> waiting_elsewhere(int rank, const std::map<int, json>& by_rank, const Call& call) {
  const auto it = by_rank.find(rank);
  if (it == by_rank.end()) return std::nullopt;
  for (const auto& channel : it->second.value("channels", json::array())) {
    const std::string name = channel.value("channel", "");
    if (name == call.channel || channel.value("pace", "") != "lockstep" || !field(channel, "open").is_object())
      continue;
    const std::uint64_t seq = field(channel, "open").value("seq", std::uint64_t{0});
    for (const auto& [other, record] : by_rank) {
      if (other == rank) continue;
      for (const auto& theirs : record.value("channels", json::array()))
        if (theirs.value("channel", "") == name && theirs.value("finished", std::uint64_t{0}) >= seq)
          return Call{name, seq, describe_call(field(channel, "open"))};
    }
  }
  return std::nullopt;
}

// How check_mpi (error.cpp) words a failed MPI call: "MPI call MPI_Allreduce(...) failed: ...".
constexpr std::string_view kMpiFailurePrefix = "MPI call ";

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

IncidentVerdict explain_incident(const std::vector<json>& records, bool all_ranks) {
  IncidentVerdict v;
  if (records.empty()) {
    v.verdict = "no incident records";
    return v;
  }
  std::map<int, json> by_rank;  // the first record of each rank, unless a later line withdrew it
  for (const auto& record : records) {
    if (record.value("withdrawn", false))
      by_rank.erase(record.value("rank", -1));
    else
      by_rank.try_emplace(record.value("rank", -1), record);
  }
  if (by_rank.empty()) {
    v.verdict = "no incident: every record was withdrawn (the run went on after the signal that made it write)";
    return v;
  }
  const int world = by_rank.begin()->second.value("world_size", static_cast<int>(by_rank.size()));
  const json* origin = &by_rank.begin()->second;
  for (const auto& [rank, record] : by_rank) {
    const int w = weight(record.value("cause", "")), best = weight(origin->value("cause", ""));
    if (w > best || (w == best && record.value("time", 0.0) < origin->value("time", 0.0))) origin = &record;
  }
  const std::string cause = origin->value("cause", "");
  const int origin_rank = origin->value("rank", -1);
  const std::int64_t step = origin->value("step", std::int64_t{0});
  std::vector<int> missing;
  for (int r = 0; r < world; ++r)
    if (!by_rank.contains(r)) missing.push_back(r);

  // A rank whose MPI call failed while others wrote nothing failed because they were gone (UCX's
  // "Endpoint timeout" when a peer's node vanished): the silent ones are the culprits, not it.
  const std::string reason = origin->value("reason", "");
  if (cause == "fatal" && reason.starts_with(kMpiFailurePrefix) && !missing.empty()) {
    v.culprits = missing;
    v.verdict = fmt::format(
        "{} wrote no record: {} (killed, crashed without a trace, or lost with {} node); rank {}'s MPI call failed "
        "talking to {} at step {} while {}: {}",
        ranks_text(missing), missing.size() > 1 ? "they died" : "it died", missing.size() > 1 ? "their" : "its",
        origin_rank, missing.size() > 1 ? "them" : "it", step, doing(*origin), reason);
  } else if (cause == "crash" || cause == "fatal") {
    v.culprits = {origin_rank};
    v.verdict = fmt::format("rank {} {} at step {} while {}: {}", origin_rank, cause == "crash" ? "crashed" : "failed",
                            step, doing(*origin), origin->value("reason", ""));
  } else if (cause == "error") {
    v.verdict = fmt::format("every rank stopped at step {}: {}", step, origin->value("reason", ""));
  } else if (const auto call = stuck_call(by_rank, *origin)) {
    std::vector<int> inside, culprits;
    std::vector<std::string> parts, elsewhere;
    for (int r = 0; r < world; ++r) {
      const std::string state = state_of(r, by_rank, *origin, *call);
      if (state == "inside" || state == "ahead") {
        inside.push_back(r);
        continue;
      }
      if (const auto other = waiting_elsewhere(r, by_rank, *call)) {
        elsewhere.push_back(fmt::format("rank {} waited in #{} ({}) on the {} channel, which other ranks finished", r,
                                        other->seq, other->what, other->channel));
        continue;
      }
      culprits.push_back(r);
      if (auto it = by_rank.find(r); it != by_rank.end())
        parts.push_back(fmt::format("rank {} never entered {} at step {}; it was {}", r, call->what,
                                    it->second.value("step", step), doing(it->second)));
      else
        parts.push_back(
            fmt::format("rank {} wrote no record{}: it died (killed, or crashed without a trace), or is "
                        "stuck with signals blocked{}",
                        r, cause == "timeout" ? " and never answered" : "",
                        cause == "signal" ? ", or was still computing when the launcher ended the job" : ""));
    }
    v.culprits = culprits;
    const std::string ended =
        cause == "signal" ? fmt::format("; the launcher then ended the job ({})", reason.substr(0, reason.find(' ')))
                          : "";
    const std::string waiting = inside.empty() ? "no rank was inside it"
                                               : fmt::format("{} waited in #{} on the {} channel",
                                                             inside.size() > 1 ? "all other ranks" : ranks_text(inside),
                                                             call->seq, call->channel);
    // Every rank reached the call, but one so late that the others timed out: a slow rank, not a hung one.
    const auto starts = call_starts(by_rank, *call);
    std::optional<std::pair<int, double>> late;
    if (culprits.empty() && starts.size() == by_rank.size() && starts.size() > 1) {
      const auto [first, last] = std::ranges::minmax_element(starts, {}, [](const auto& s) { return s.second; });
      const double stuck_for = origin->contains("stuck") && field(*origin, "stuck").is_object()
                                   ? field(*origin, "stuck").value("age_s", 0.0)
                                   : 0.0;
      if (last->second - first->second > 0.5 * stuck_for && stuck_for > 0)
        late = {last->first, last->second - first->second};
    }
    if (late) {
      v.culprits = {late->first};
      v.verdict = fmt::format(
          "rank {} entered {} {:.2f} s after the first rank, past --collective-timeout: a slow rank, not a hung one; "
          "when asked it was {}",
          late->first, call->what, late->second, doing(by_rank.at(late->first)));
    } else if (culprits.empty() && elsewhere.empty())
      v.verdict = fmt::format("every rank is inside {} on the {} channel at step {}: a stuck network or device{}",
                              call->what, call->channel, step, ended);
    else {
      parts.insert(parts.end(), elsewhere.begin(), elsewhere.end());
      v.verdict = fmt::format("{}; {}{}", fmt::join(parts, "; "), waiting, ended);
    }
  } else {
    v.verdict = fmt::format("rank {} wrote the first record ({}) at step {}: {}", origin_rank, cause, step,
                            origin->value("reason", ""));
  }
  if (!missing.empty() && cause != "signal" && cause != "timeout" && v.culprits != missing)
    v.verdict += fmt::format(" ({} wrote no record)", ranks_text(missing));

  std::vector<int> shown = all_ranks ? std::vector<int>{} : v.culprits;
  if (all_ranks)
    for (const auto& [rank, record] : by_rank) shown.push_back(rank);
  if (!all_ranks && std::ranges::find(shown, origin_rank) == shown.end()) shown.push_back(origin_rank);
  v.details = describe_ranks(by_rank, world, *origin, shown);
  return v;
}

}  // namespace mnddp
