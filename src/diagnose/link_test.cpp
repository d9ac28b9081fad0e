// Link rounds over the training backend, and their judgement.
#include "mnddp/diagnose/link_test.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// The typical value of a kind: the upper median, so that a few slow links (all of one bad node's,
// in a small world half of a kind) do not drag the reference down to themselves.
double upper_median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One round: `repeats` transfers to `to` while receiving from `from`; the median time.
double time_round(Communicator& comm, MpiComm& control, const void* send, void* recv, int to, int from,
                  const LinkTestOptions& options) {
  control.barrier();  // every pair of the round starts together, as in training
  // One untimed transfer first: it pays for connecting (transports connect on first use). The
  // injected slow rank then waits before each transfer: at least `slow_delay_s`, and `slow_factor`
  // times the longest transfer of the round so far, so that it stays that much slower however the
  // machine's load changes within the round. (A delay fixed from the first transfer alone did not:
  // with the load up, 1 MiB took 0.1 s within a node, the 0.2 s delay made its pair only 3x slower,
  // and the slow rank went unblamed.)
  const bool slow = comm.rank() == options.slow_rank;
  auto transfer = [&] {
    const auto begin = Clock::now();
    comm.send_receive(send, to, recv, from, options.bytes);
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  double longest = transfer();
  std::vector<double> times;
  for (int i = 0; i < options.repeats; ++i) {
    if (slow)
      std::this_thread::sleep_for(
          std::chrono::duration<double>(std::max(options.slow_delay_s, options.slow_factor * longest)));
    times.push_back(transfer());
    longest = std::max(longest, times.back());
  }
  return median(times);
}

}  // namespace

std::vector<LinkSample> measure_links(Communicator& comm, MpiComm& control, const void* send, void* recv,
                                      const LinkTestOptions& options) {
  const int n = comm.size();
  const int me = comm.rank();
  const CollectiveLabel label("pre-flight link test");
  // The rounds, the same number on every rank: the ring, then r XOR k for k = 1, 2, 4, ... (the
  // hypercube's dimensions: the larger k reach other nodes, whatever the ranks per node). A rank
  // whose partner does not exist sits the round out (partner -1).
  struct Round {
    int to, from;
    bool ring;
  };
  std::vector<Round> rounds;
  if (n > 1) rounds.push_back({(me + 1) % n, (me + n - 1) % n, true});
  for (int k = 1, dimensions = 0; k < n && dimensions < options.pair_rounds; k *= 2, ++dimensions) {
    const int partner = (me ^ k) < n ? me ^ k : -1;
    rounds.push_back({partner, partner, false});
  }
  // A first pass connects every pair: transports connect on first use, some then switch to a faster
  // path in the background, and neither is what training will see.
  for (const Round& round : rounds) {
    control.barrier();
    if (round.to >= 0) comm.send_receive(send, round.to, recv, round.from, options.bytes);
  }
  // Per rank, per round: {partner, seconds}.
  std::vector<double> mine;
  for (const Round& round : rounds) {
    if (round.to >= 0) {
      mine.push_back(round.to);
      mine.push_back(time_round(comm, control, send, recv, round.to, round.from, options));
    } else {
      control.barrier();  // the round's start, kept in step with the others
      mine.push_back(-1);
      mine.push_back(0.0);
    }
  }
  const std::size_t per_rank = mine.size();
  std::vector<double> all(per_rank * static_cast<std::size_t>(n));
  if (per_rank > 0) control.allgather(mine.data(), all.data(), per_rank, DType::F64);
  std::vector<LinkSample> samples;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < per_rank; i += 2) {
      const double partner = all[static_cast<std::size_t>(r) * per_rank + i];
      if (partner < 0) continue;
      samples.push_back({r, static_cast<int>(partner), i == 0, all[static_cast<std::size_t>(r) * per_rank + i + 1]});
    }
  return samples;
}

LinkJudgement judge_links(const std::vector<LinkSample>& samples, const std::vector<std::string>& hosts,
                          std::size_t bytes, double slow_fraction) {
  LinkJudgement j;
  const auto gbps = [bytes](double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; };
  const auto same_host = [&](int a, int b) {
    return a < static_cast<int>(hosts.size()) && b < static_cast<int>(hosts.size()) && hosts[a] == hosts[b];
  };
  // A pair's time is the longer of its two ranks' (both waited for the slower end).
  std::map<std::pair<int, int>, double> pairs;
  std::vector<double> ring;
  std::vector<std::pair<int, double>> ring_by_rank;
  for (const auto& s : samples) {
    if (s.ring) {
      ring.push_back(gbps(s.seconds));
      ring_by_rank.push_back({s.from, gbps(s.seconds)});
      continue;
    }
    auto& seconds = pairs[{std::min(s.from, s.to), std::max(s.from, s.to)}];
    seconds = std::max(seconds, s.seconds);
  }
  j.ring_median_gbps = median(ring);
  if (!ring_by_rank.empty()) {
    const auto slowest = std::ranges::min_element(ring_by_rank, {}, [](const auto& r) { return r.second; });
    j.ring_min_gbps = slowest->second;
    j.ring_min_rank = slowest->first;
  }
  std::vector<double> within, across;
  for (const auto& [pair, seconds] : pairs)
    (same_host(pair.first, pair.second) ? within : across).push_back(gbps(seconds));
  j.pair_median_same_host = upper_median(within);
  j.pair_median_cross_host = upper_median(across);

  std::map<int, int> slow_pairs, all_pairs;
  for (const auto& [pair, seconds] : pairs) {
    const bool within_host = same_host(pair.first, pair.second);
    const double typical = within_host ? j.pair_median_same_host : j.pair_median_cross_host;
    ++all_pairs[pair.first];
    ++all_pairs[pair.second];
    if (gbps(seconds) >= slow_fraction * typical) continue;
    j.slow.push_back({pair.first, pair.second, false, gbps(seconds), typical, within_host});
    ++slow_pairs[pair.first];
    ++slow_pairs[pair.second];
  }
  for (const auto& [rank, slow] : slow_pairs) {
    const int total = all_pairs[rank];
    if (2 * slow > total && (slow >= 2 || total == 1)) j.blamed_ranks.push_back(rank);
  }
  std::set<std::string> seen;
  for (int rank : j.blamed_ranks) {
    const std::string host = rank < static_cast<int>(hosts.size()) ? hosts[rank] : "?";
    if (seen.insert(host).second) j.exclude.push_back(host);
  }
  return j;
}

LinkJudgement judge_links_twice(const std::function<std::vector<LinkSample>()>& measure,
                                const std::vector<std::string>& hosts, std::size_t bytes, double slow_fraction) {
  std::vector<LinkSample> samples = measure();
  LinkJudgement first = judge_links(samples, hosts, bytes, slow_fraction);
  if (first.slow.empty()) return first;
  const std::vector<LinkSample> again = measure();
  // The same rounds in the same order on every pass: sample i is the same link both times.
  for (std::size_t i = 0; i < samples.size() && i < again.size(); ++i)
    samples[i].seconds = std::min(samples[i].seconds, again[i].seconds);
  LinkJudgement judged = judge_links(samples, hosts, bytes, slow_fraction);
  judged.passes = 2;
  return judged;
}

}  // namespace mnddp
