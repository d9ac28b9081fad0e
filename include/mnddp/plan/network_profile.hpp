// A cluster's network as `mnddp plan` models it: per level (within a node, across nodes) the latency
// of one hop and the bandwidth each rank gets while every rank sends at once; either measured on
// the cluster (`mnddp preflight --save-network FILE` writes it) or one of the reference profiles
// documented in docs/PLAN.md with their sources. Pure, no torch, no MPI.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mnddp {

// One level of the network: a step of a ring within a node, or one that crosses to another node.
struct LinkLevel {
  double latency_s = 0.0;      // one hop, a small message
  double bandwidth_Bps = 0.0;  // bytes/s each rank sends while every rank of its node sends too
  double ll_latency_s = 0.0;   // NCCL's LL protocol: one hop's latency (0: NCCL's ratio to Simple's)
  // Measured transfers (bytes, seconds), ascending by size, when the profile was measured; the
  // model interpolates in them instead of latency + bytes / bandwidth.
  std::vector<std::pair<double, double>> measured;

  // One hop of `bytes`.
  double hop_seconds(double bytes) const;
};

// Which library carries gradients: it decides the collective algorithms the model considers.
enum class CollectiveLibrary { Nccl, Mpi };

struct NetworkProfile {
  std::string name;         // "h200-nvlink-ib400", or the file it came from
  std::string description;  // the hardware, in words
  std::string source;       // where its figures come from (a measurement, a datasheet, a paper)
  CollectiveLibrary library = CollectiveLibrary::Nccl;
  int gpus_per_node = 8;           // ranks a node runs (a CPU node: its ranks)
  int cores_per_node = 0;          // CPU ranks share this many cores (0: ranks do not share compute)
  double launch_latency_s = 0;     // a collective's fixed cost (NCCL's base latency, a call into MPI)
  double ll_launch_latency_s = 0;  // NCCL's LL protocol's (0: NCCL's ratio to Simple's)
  LinkLevel intra;
  LinkLevel inter;
};

// The named reference profiles (docs/PLAN.md cites the source of each figure).
const std::vector<NetworkProfile>& reference_networks();

// `spec`: a reference profile's name or a JSON file's path. Throws UsageError naming `option` and
// the value: an unknown name, a file that cannot be read or does not parse, a field out of range.
NetworkProfile load_network_profile(const std::string& spec, const std::string& option = "--network");

// The JSON text (what --save-network writes and load_network_profile reads).
std::string network_profile_json(const NetworkProfile& profile);
NetworkProfile parse_network_profile(const std::string& json_text, const std::string& what);

std::string_view library_name(CollectiveLibrary library);

}  // namespace mnddp
