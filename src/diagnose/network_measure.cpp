// The network measured by size, within and across nodes, as a profile for mnddp plan.
#include "mnddp/diagnose/network_measure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include "mnddp/diagnose/link_test.hpp"

namespace mnddp {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// A level from its measured (bytes, seconds): latency the smallest size's time, bandwidth the
// slope between the two largest (a transfer's fixed costs cancel out).
LinkLevel level_from(std::vector<std::pair<double, double>> points) {
  LinkLevel level;
  if (points.empty()) return level;
  // Times must not fall as sizes grow (a noisy sample would make the interpolation non-monotonic).
  for (std::size_t i = 1; i < points.size(); ++i) points[i].second = std::max(points[i].second, points[i - 1].second);
  level.latency_s = points.front().second;
  const auto& [b2, t2] = points.back();
  level.bandwidth_Bps = b2 / std::max(t2, 1e-9);
  if (points.size() >= 2) {
    const auto& [b1, t1] = points[points.size() - 2];
    if (t2 > t1) level.bandwidth_Bps = (b2 - b1) / (t2 - t1);
  }
  level.measured = std::move(points);
  return level;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

}  // namespace

NetworkProfile measure_network(Communicator& comm, MpiComm& control, const void* send, void* recv,
                               std::size_t max_bytes, const std::vector<std::string>& hosts, const RankInfo& rank,
                               CollectiveLibrary library) {
  std::vector<std::pair<double, double>> intra, inter;
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 8; bytes < max_bytes; bytes *= 8) sizes.push_back(bytes);
  sizes.push_back(max_bytes);
  for (const std::size_t bytes : sizes) {
    LinkTestOptions options;
    options.bytes = bytes;
    options.repeats = bytes <= (64u << 10) ? 20 : 5;  // small transfers vary more; they cost nothing
    std::vector<double> within, across;
    for (const LinkSample& s : measure_links(comm, control, send, recv, options)) {
      if (s.ring) continue;  // pairs only: every rank sends and receives once per transfer, as a ring's step
      (hosts[s.from] == hosts[s.to] ? within : across).push_back(s.seconds);
    }
    if (!within.empty()) intra.emplace_back(static_cast<double>(bytes), median(within));
    if (!across.empty()) inter.emplace_back(static_cast<double>(bytes), median(across));
  }
  NetworkProfile p;
  p.library = library;
  p.gpus_per_node = rank.local_size;
  p.cores_per_node = library == CollectiveLibrary::Mpi ? static_cast<int>(std::thread::hardware_concurrency()) : 0;
  p.intra = level_from(intra);
  p.inter = inter.empty() ? p.intra : level_from(inter);
  p.name = fmt::format("measured on {} ({} ranks, {} node{}, {})", hosts.front(), rank.world_size, rank.node_count,
                       rank.node_count == 1 ? "" : "s", today());
  p.description = fmt::format("{} ranks a node over {}", rank.local_size, library_name(library));
  p.source = fmt::format("mnddp preflight --save-network, {}{}", today(),
                         inter.empty() ? "; one node: across nodes is a copy of within (not measured)" : "");
  return p;
}

}  // namespace mnddp
