// The consistency checks: hashes out with the interval's metrics, and the explanation when they differ.
#include "mnddp/diagnose/consistency_check.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::string describe_call(const CollectiveHistoryEntry& call) {
  std::string text = fmt::format("{} ({}", call.op, human_bytes(call.bytes));
  if (call.label[0] != '\0') text += fmt::format(", {}", call.label);
  return text + ")";
}

std::string ranks_word(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
}

// "ranks 0, 2-3 (hash 1f..) | rank 1 (hash 9e..)": the groups, the largest first.
std::string describe_groups(const std::vector<std::vector<int>>& groups, const std::vector<std::uint64_t>& values) {
  std::string text;
  for (const auto& group : groups)
    text += fmt::format("{}{} {:016x}", text.empty() ? "" : "; ", ranks_word(group),
                        values[static_cast<std::size_t>(group.front())]);
  return text;
}

// Who differs from whom: with a majority, the others; else every group.
std::string who_differs(const std::vector<std::vector<int>>& groups) {
  if (groups.size() > 1 && groups[0].size() > groups[1].size()) {
    std::vector<int> others;
    for (std::size_t g = 1; g < groups.size(); ++g) others.insert(others.end(), groups[g].begin(), groups[g].end());
    std::sort(others.begin(), others.end());
    return fmt::format("{} differ{} from the other {}", ranks_word(others), others.size() == 1 ? "s" : "",
                       groups[0].size());
  }
  std::vector<std::string> parts;
  for (const auto& group : groups) parts.push_back(ranks_word(group));
  return fmt::format("no majority: {}", fmt::join(parts, " | "));
}

std::string since(std::int64_t step, std::int64_t previous_agreed) {
  if (previous_agreed < 0) return fmt::format("found at the check of step {}, the first of this invocation", step);
  return fmt::format("found at the check of step {}; the previous one, at step {}, agreed", step, previous_agreed);
}

nlohmann::json lockstep_histories() {
  nlohmann::json channels = nlohmann::json::object();
  for (const auto& s : CollectiveTracker::snapshot_all(/*with_history=*/true)) {
    if (s.pace != ChannelPace::Lockstep) continue;
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& c : s.history) calls.push_back({c.seq, c.hash, c.bytes, c.op, c.label});
    channels[s.channel] = {{"hash", s.hash}, {"started", s.started}, {"calls", std::move(calls)}};
  }
  return channels;
}

ChannelHistory history_from(const nlohmann::json& channel) {
  ChannelHistory h;
  h.started = channel.at("started").get<std::uint64_t>();
  for (const auto& c : channel.at("calls")) {
    CollectiveHistoryEntry e;
    e.seq = c[0].get<std::uint64_t>();
    e.hash = c[1].get<std::uint64_t>();
    e.bytes = c[2].get<std::uint64_t>();
    const auto op = c[3].get<std::string>();
    const auto label = c[4].get<std::string>();
    op.copy(e.op, sizeof(e.op) - 1);
    label.copy(e.label, sizeof(e.label) - 1);
    h.calls.push_back(e);
  }
  return h;
}

}  // namespace

std::string rank_ranges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<std::vector<int>> group_ranks(const std::vector<std::uint64_t>& value_of_rank) {
  std::map<std::uint64_t, std::vector<int>> by_value;
  for (std::size_t r = 0; r < value_of_rank.size(); ++r) by_value[value_of_rank[r]].push_back(static_cast<int>(r));
  std::vector<std::vector<int>> groups;
  for (auto& [value, ranks] : by_value) groups.push_back(std::move(ranks));
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  return groups;
}

std::string first_difference(const std::string& channel, const std::vector<ChannelHistory>& of_rank) {
  const std::size_t n = of_rank.size();
  std::uint64_t oldest = 1, newest = 0;
  for (const auto& h : of_rank) {
    if (!h.calls.empty()) oldest = std::max(oldest, h.calls.front().seq);
    newest = std::max(newest, h.started);
  }
  auto call_at = [](const ChannelHistory& h, std::uint64_t seq) -> const CollectiveHistoryEntry* {
    if (h.calls.empty() || seq < h.calls.front().seq || seq > h.calls.back().seq) return nullptr;
    const auto& c = h.calls[static_cast<std::size_t>(seq - h.calls.front().seq)];
    return c.seq == seq ? &c : nullptr;
  };
  for (std::uint64_t seq = oldest; seq <= newest; ++seq) {
    std::vector<std::uint64_t> key(n, 0);  // 0: no such call on that rank
    for (std::size_t r = 0; r < n; ++r)
      if (const auto* c = call_at(of_rank[r], seq)) key[r] = c->hash;
    if (std::all_of(key.begin(), key.end(), [&](std::uint64_t k) { return k == key[0] && k != 0; })) continue;
    if (seq == oldest && oldest > 1)
      return fmt::format("the {} channel's calls already differ at #{}, the oldest of the {} kept", channel, seq,
                         CollectiveTracker::kHistory);
    std::vector<std::string> parts;
    for (const auto& group : group_ranks(key)) {
      const auto& h = of_rank[static_cast<std::size_t>(group.front())];
      const auto* c = call_at(h, seq);
      parts.push_back(c ? fmt::format("{} called {}", ranks_word(group), describe_call(*c))
                        : fmt::format("{} made no call #{} (made {})", ranks_word(group), seq, h.started));
    }
    return fmt::format("the first differing call is #{} on the {} channel: {}", seq, channel, fmt::join(parts, "; "));
  }
  return "";
}

ConsistencyCheck::ConsistencyCheck(MpiComm& control, std::int64_t replicas_every,
                                   std::function<std::uint64_t()> fingerprint)
    : control_(control), replicas_every_(replicas_every), fingerprint_(std::move(fingerprint)) {}

void ConsistencyCheck::contribute(ReductionMessage& message, const IntervalPoint& at) {
  ++intervals_;
  sequence_hash_ = CollectiveTracker::lockstep_hash();
  sequence_slot_ = message.add_min_max(sequence_hash_);
  parameters_checked_ = replicas_every_ > 0 && fingerprint_ && (intervals_ % replicas_every_ == 0 || at.last);
  parameter_hash_ = parameters_checked_ ? fingerprint_() : 0;
  parameter_slot_ = message.add_min_max(parameter_hash_);
}

void ConsistencyCheck::receive(const ReductionMessage& message, const IntervalPoint& at) {
  if (message.min(sequence_slot_) != message.max(sequence_slot_)) sequences_differ(at);
  last_sequence_agreed_ = at.step;
  if (!parameters_checked_) return;
  if (message.min(parameter_slot_) != message.max(parameter_slot_)) replicas_differ(at);
  last_parameters_agreed_ = at.step;
}

void ConsistencyCheck::sequences_differ(const IntervalPoint& at) {
  // Every rank is here (they all saw the same min and max): one all-gather of the recent histories.
  const nlohmann::json mine = {{"hash", sequence_hash_}, {"channels", lockstep_histories()}};
  std::vector<nlohmann::json> of_rank;
  std::vector<std::uint64_t> hashes;
  for (const auto& text : allgather_strings(control_, mine.dump())) {
    of_rank.push_back(nlohmann::json::parse(text));
    hashes.push_back(of_rank.back().at("hash").get<std::uint64_t>());
  }
  const auto groups = group_ranks(hashes);
  std::string detail;
  for (const auto& [channel, first] : of_rank.front().at("channels").items()) {
    std::vector<ChannelHistory> histories;
    for (const auto& j : of_rank) {
      const auto& channels = j.at("channels");
      histories.push_back(channels.contains(channel) ? history_from(channels.at(channel)) : ChannelHistory{});
    }
    detail = first_difference(channel, histories);
    if (!detail.empty()) break;
  }
  if (detail.empty()) detail = "the ranks run different sets of channels";
  throw Error(fmt::format("ranks out of step: their collective call sequences differ ({}): {}; {}. Run with "
                          "--debug-collectives to stop at the first differing call",
                          who_differs(groups), detail, since(at.step, last_sequence_agreed_)),
              kExitDesync, /*collective=*/true);
}

void ConsistencyCheck::replicas_differ(const IntervalPoint& at) {
  std::vector<std::uint64_t> fingerprints(static_cast<std::size_t>(control_.size()));
  control_.allgather(&parameter_hash_, fingerprints.data(), 1, DType::I64);
  const auto groups = group_ranks(fingerprints);
  throw Error(
      fmt::format("replicas differ: the parameters are no longer identical on every rank ({}; "
                  "fingerprints: {}); {}. A nondeterministic or faulty device, or memory corruption, "
                  "changed a replica: the run stops before it averages gradients of different models",
                  who_differs(groups), describe_groups(groups, fingerprints), since(at.step, last_parameters_agreed_)),
      kExitDesync, /*collective=*/true);
}

}  // namespace mnddp
