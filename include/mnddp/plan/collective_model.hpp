// How long a collective takes on a network profile: latency and bandwidth terms per hop, within and
// across nodes, for NCCL's ring and tree (and MPI's ring and recursive doubling), and the choice
// between them that the library makes (the faster). Equations: docs/PLAN.md, "Collectives". Pure.
#pragma once

#include <string_view>

#include "mnddp/plan/network_profile.hpp"

namespace mnddp {

struct Topology {
  int nodes = 1;
  int ranks_per_node = 1;
  int ranks() const { return nodes * ranks_per_node; }
};

enum class Algorithm { Ring, Tree, RecursiveDoubling };
std::string_view algorithm_name(Algorithm algorithm);
// NCCL's protocols: Simple (full bandwidth, the highest latency) and LL (a flag in every 8 bytes:
// a fraction of the latency, half the bandwidth or less). (LL128 lies between; not modelled.)
enum class Protocol { Simple, LowLatency };

struct CollectiveTime {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  double seconds = 0.0;
};

// All-reduce of `bytes` on every rank. A world of one rank costs nothing.
double ring_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes, Protocol p = Protocol::Simple);
double tree_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes, Protocol p = Protocol::Simple);
double recursive_doubling_allreduce_seconds(const NetworkProfile& net, Topology t, double bytes);
// The algorithm (and protocol) the library would pick: NCCL the fastest of ring and tree (the tree
// across nodes only), each in Simple and LL; MPI the faster of ring and recursive doubling.
CollectiveTime allreduce(const NetworkProfile& net, Topology t, double bytes);

// Reduce-scatter of `bytes` (each rank keeps bytes / ranks) and all-gather to `bytes` on every
// rank: half a ring all-reduce each (NCCL runs both as rings).
double reduce_scatter_seconds(const NetworkProfile& net, Topology t, double bytes);
double allgather_seconds(const NetworkProfile& net, Topology t, double bytes);

// The bandwidth a ring step gets: the slower of the node's links and its share of the network.
double ring_bandwidth_Bps(const NetworkProfile& net, Topology t);

}  // namespace mnddp
