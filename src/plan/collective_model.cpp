// The collectives' times: docs/PLAN.md, "Collectives", derives each line.
#include "mnddp/plan/collective_model.hpp"

#include <algorithm>
#include <cmath>

namespace mnddp {

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Ring:
      return "ring";
    case Algorithm::Tree:
      return "tree";
    case Algorithm::RecursiveDoubling:
      return "recursive doubling";
  }
  return "?";
}

namespace {

// NCCL's tree all-reduce reaches ~92% of the ring's bus bandwidth (tuning.cc: busBw * .92).
constexpr double kTreeBandwidthFraction = 0.92;
// NCCL's LL protocol (tuning.cc): half the bus bandwidth on a ring, 1/3.8 of it on a tree; its
// latencies in the ratios of NCCL's tables when a profile gives none (hop: NVLink 0.6 against
// Simple's 3.4 us, network 2.7 against 14; base 6.6 against 8.4).
constexpr double kRingLlBandwidth = 0.5;
constexpr double kTreeLlBandwidth = 1.0 / 3.8;
constexpr double kLlHopRatio = 0.18;
constexpr double kLlBaseRatio = 6.6 / 8.4;

double hop_latency(const LinkLevel& level, Protocol p) {
  if (p == Protocol::Simple) return level.latency_s;
  return level.ll_latency_s > 0 ? level.ll_latency_s : level.latency_s * kLlHopRatio;
}

double launch_latency(const NetworkProfile& net, Protocol p) {
  if (p == Protocol::Simple) return net.launch_latency_s;
  return net.ll_launch_latency_s > 0 ? net.ll_launch_latency_s : net.launch_latency_s * kLlBaseRatio;
}

double log2_ceil(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

// One ring step's time for a chunk, where the ring's bandwidth is `bw` and its hop latency `lat`.
// With measured hops, the step is the measured transfer of the chunk at its level.
double ring_step(const NetworkProfile& net, Topology t, double chunk, bool crosses) {
  const LinkLevel& level = crosses ? net.inter : net.intra;
  if (level.measured.size() >= 2) return level.hop_seconds(chunk);
  return level.latency_s + chunk / ring_bandwidth_Bps(net, t);
}

}  // namespace

double ring_bandwidth_Bps(const NetworkProfile& net, Topology t) {
  if (t.nodes <= 1) return net.intra.bandwidth_Bps;
  // Each of the node's rings enters and leaves it once; their traffic shares the node's NICs
  // (each rank's share: inter.bandwidth), and inside the node they run on the intra links.
  return std::min(net.intra.bandwidth_Bps, net.inter.bandwidth_Bps * t.ranks_per_node);
}

// 2(n-1) steps of bytes/n: the reduce-scatter, then the all-gather. Of them, 2(k-1) on k nodes pay
// the network's latency (NCCL's tuning model: nInterSteps = 2(nNodes-1)).
double ring_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes, Protocol p) {
  const int n = t.ranks();
  if (n <= 1) return 0.0;
  const double chunk = bytes / n;
  const int steps = 2 * (n - 1);
  const int inter_steps = 2 * (t.nodes - 1);
  const int intra_steps = steps - std::min(steps, inter_steps);
  if (net.intra.measured.size() >= 2 || net.inter.measured.size() >= 2)
    return net.launch_latency_s + intra_steps * ring_step(net, t, chunk, false) +
           std::min(steps, inter_steps) * ring_step(net, t, chunk, true);
  const double bandwidth = ring_bandwidth_Bps(net, t) * (p == Protocol::Simple ? 1.0 : kRingLlBandwidth);
  return launch_latency(net, p) + intra_steps * hop_latency(net.intra, p) +
         std::min(steps, inter_steps) * hop_latency(net.inter, p) + steps * chunk / bandwidth;
}

// NCCL's tree: a chain through each node's ranks, a double binary tree across nodes; the data
// goes up (reduce) and down (broadcast), pipelined: latency 2((g-1) intra + log2(k) inter) hops,
// bandwidth bytes / (bw/2) at 92% of the ring's bus bandwidth (NCCL's tuning model).
double tree_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes, Protocol p) {
  if (t.ranks() <= 1) return 0.0;
  const double latency =
      2.0 * ((t.ranks_per_node - 1) * hop_latency(net.intra, p) + log2_ceil(t.nodes) * hop_latency(net.inter, p));
  const double fraction = p == Protocol::Simple ? kTreeBandwidthFraction : kTreeBandwidthFraction * kTreeLlBandwidth;
  return launch_latency(net, p) + latency + 2.0 * bytes / (fraction * ring_bandwidth_Bps(net, t));
}

// MPI's recursive doubling (small messages in Open MPI's and MPICH's all-reduce): log2(n) rounds,
// each an exchange of the whole buffer; the rounds past log2(g) cross nodes.
double recursive_doubling_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes) {
  if (t.ranks() <= 1) return 0.0;
  const double intra_rounds = log2_ceil(t.ranks_per_node);
  const double inter_rounds = log2_ceil(t.ranks()) - intra_rounds;
  return net.launch_latency_s + intra_rounds * net.intra.hop_seconds(bytes) +
         inter_rounds * net.inter.hop_seconds(bytes);
}

CollectiveTime allreduce(const NetworkProfile& net, Topology t, double bytes) {
  CollectiveTime best{Algorithm::Ring, Protocol::Simple, ring_allreduce_seconds(net, t, bytes)};
  const auto consider = [&](Algorithm a, Protocol p, double seconds) {
    if (seconds < best.seconds) best = {a, p, seconds};
  };
  if (net.library == CollectiveLibrary::Mpi) {
    consider(Algorithm::RecursiveDoubling, Protocol::Simple, recursive_doubling_allreduce_seconds(net, t, bytes));
    return best;
  }
  const bool measured = net.intra.measured.size() >= 2 || net.inter.measured.size() >= 2;
  if (!measured)
    consider(Algorithm::Ring, Protocol::LowLatency, ring_allreduce_seconds(net, t, bytes, Protocol::LowLatency));
  if (t.nodes > 1) {  // NCCL's tree spans nodes; within one node it runs rings
    consider(Algorithm::Tree, Protocol::Simple, tree_allreduce_seconds(net, t, bytes));
    consider(Algorithm::Tree, Protocol::LowLatency, tree_allreduce_seconds(net, t, bytes, Protocol::LowLatency));
  }
  return best;
}

// n-1 steps of bytes/n around the ring: each rank's share reduced (or gathered) once.
double reduce_scatter_seconds(const NetworkProfile& net, Topology t, double bytes) {
  const int n = t.ranks();
  if (n <= 1) return 0.0;
  const double chunk = bytes / n;
  const int steps = n - 1;
  const int inter_steps = std::min(steps, t.nodes - 1);
  if (net.intra.measured.size() >= 2 || net.inter.measured.size() >= 2)
    return net.launch_latency_s + (steps - inter_steps) * ring_step(net, t, chunk, false) +
           inter_steps * ring_step(net, t, chunk, true);
  return net.launch_latency_s + (steps - inter_steps) * net.intra.latency_s + inter_steps * net.inter.latency_s +
         steps * chunk / ring_bandwidth_Bps(net, t);
}

double allgather_seconds(const NetworkProfile& net, Topology t, double bytes) {
  return reduce_scatter_seconds(net, t, bytes);
}

}  // namespace mnddp
