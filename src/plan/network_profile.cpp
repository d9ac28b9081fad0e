// Network profiles: the reference ones, and reading and writing the JSON form.
#include "mnddp/plan/network_profile.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "mnddp/error.hpp"
#include "mnddp/plan/input_file.hpp"

namespace mnddp {

double LinkLevel::hop_seconds(double bytes) const {
  if (measured.size() < 2) return latency_s + (bandwidth_Bps > 0 ? bytes / bandwidth_Bps : 0.0);
  // Piecewise linear between measured sizes; beyond the largest, its time plus the rest at the
  // bandwidth (the large-message slope); below the smallest, the smallest's time (latency-bound).
  if (bytes <= measured.front().first) return measured.front().second;
  const auto& last = measured.back();
  if (bytes >= last.first) return last.second + (bytes - last.first) / bandwidth_Bps;
  const auto upper = std::ranges::lower_bound(measured, bytes, {}, [](const auto& p) { return p.first; });
  const auto lower = upper - 1;
  const double f = (bytes - lower->first) / (upper->first - lower->first);
  return lower->second + f * (upper->second - lower->second);
}

std::string_view library_name(CollectiveLibrary library) { return library == CollectiveLibrary::Nccl ? "nccl" : "mpi"; }

namespace {

NetworkProfile reference(std::string name, std::string description, std::string source, int gpus_per_node,
                         double launch_us, LinkLevel intra, LinkLevel inter) {
  NetworkProfile p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.source = std::move(source);
  p.gpus_per_node = gpus_per_node;
  p.launch_latency_s = launch_us * 1e-6;
  p.intra = std::move(intra);
  p.inter = std::move(inter);
  return p;
}

LinkLevel level(double latency_us, double bandwidth_GBps) {
  return LinkLevel{latency_us * 1e-6, bandwidth_GBps * 1e9, 0, {}};
}

}  // namespace

// Figures and their sources: docs/PLAN.md, "Reference networks". Bandwidths are what a rank sustains
// in NCCL's ring (bus bandwidth), not the links' line rates; across nodes, per GPU, i.e. the node's
// NICs' effective rate shared by its GPUs. Latencies: NCCL's tuning model (Simple protocol).
const std::vector<NetworkProfile>& reference_networks() {
  static const std::vector<NetworkProfile> all = {
      reference("h200-nvlink-ib400", "8x H200 SXM a node, NVLink 4 through NVSwitch; 8x 400 Gb/s InfiniBand NDR",
                "ring bus bandwidth 370 GB/s in a node and 46-48 GB/s a NIC (nccl-tests issues 212, 272, 290); "
                "latencies from NCCL's tuning.cc",
                8, 8.4, level(3.4, 370), level(14.0, 47)),
      reference("h100-nvlink-ib400", "8x H100 SXM a node, NVLink 4 through NVSwitch; 8x 400 Gb/s InfiniBand NDR",
                "ring bus bandwidth 370 GB/s in a node and 46-48 GB/s a NIC (nccl-tests issues 212, 290); latencies "
                "from NCCL's tuning.cc",
                8, 8.4, level(3.4, 370), level(14.0, 47)),
      reference("v100-nvlink-ib100", "8x V100 SXM2 a node, NVLink 2; one 100 Gb/s NIC a node",
                "NCCL's constants SM70_NVLINK_BW (20 GB/s a link, 6 links) and NET_BW (12 GB/s for 100 Gb/s); "
                "the PyTorch DDP paper's cluster (Li et al., VLDB 2020)",
                8, 8.4, level(3.4, 120), level(14.0, 1.5)),
      reference("p100-pcie-25gbe", "4x Pascal P100 PCIe a node; one 25 Gb/s RoCE NIC a node",
                "the Horovod paper's cluster (Sergeev and Del Balso 2018); NCCL's PCI_BW (12 GB/s), 25 Gb/s at 93%", 4,
                8.4, level(5.7, 10), level(14.0, 0.73)),
  };
  return all;
}

namespace {

double number(const nlohmann::json& object, const char* key, const std::string& what, double low, double high) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    throw UsageError(fmt::format("{}: '{}' is missing or not a number", what, key));
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < low || value > high)
    throw UsageError(fmt::format("{}: '{}' is {:g}, outside [{:g}, {:g}]", what, key, value, low, high));
  return value;
}

LinkLevel parse_level(const nlohmann::json& doc, const char* key, const std::string& what) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_object())
    throw UsageError(fmt::format("{}: '{}' is missing or not an object", what, key));
  const std::string where = fmt::format("{}: {}", what, key);
  LinkLevel level;
  level.latency_s = number(*it, "latency_us", where, 0.0, 1e6) * 1e-6;
  level.bandwidth_Bps = number(*it, "bandwidth_GBps", where, 1e-6, 1e5) * 1e9;
  if (it->contains("ll_latency_us")) level.ll_latency_s = number(*it, "ll_latency_us", where, 0.0, 1e6) * 1e-6;
  if (const auto m = it->find("measured"); m != it->end()) {
    if (!m->is_array() || m->size() > 4096)
      throw UsageError(fmt::format("{}: 'measured' is not a list of [bytes, seconds]", where));
    for (const auto& point : *m) {
      if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_number())
        throw UsageError(fmt::format("{}: 'measured' is not a list of [bytes, seconds]", where));
      const double bytes = point[0].get<double>();
      const double seconds = point[1].get<double>();
      if (!(bytes > 0 && bytes < 1e15 && seconds > 0 && seconds < 1e4) ||
          (!level.measured.empty() && bytes <= level.measured.back().first))
        throw UsageError(
            fmt::format("{}: measured point [{:g}, {:g}] is out of range or out of order", where, bytes, seconds));
      level.measured.emplace_back(bytes, seconds);
    }
  }
  return level;
}

std::string text(const nlohmann::json& object, const char* key, const std::string& fallback, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_string()) throw UsageError(fmt::format("{}: '{}' is not a string", what, key));
  return it->get<std::string>();
}

nlohmann::json level_json(const LinkLevel& level) {
  nlohmann::json out = {{"latency_us", level.latency_s * 1e6}, {"bandwidth_GBps", level.bandwidth_Bps / 1e9}};
  if (level.ll_latency_s > 0) out["ll_latency_us"] = level.ll_latency_s * 1e6;
  if (!level.measured.empty()) {
    out["measured"] = nlohmann::json::array();
    for (const auto& [bytes, seconds] : level.measured) out["measured"].push_back({bytes, seconds});
  }
  return out;
}

}  // namespace

NetworkProfile parse_network_profile(const std::string& json_text, const std::string& what) {
  const nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) throw UsageError(fmt::format("{}: not a JSON network profile", what));
  NetworkProfile p;
  p.name = text(doc, "name", what, what);
  p.description = text(doc, "description", "", what);
  p.source = text(doc, "source", "", what);
  const std::string library = text(doc, "library", "nccl", what);
  if (library != "nccl" && library != "mpi")
    throw UsageError(fmt::format("{}: 'library' is '{}', not nccl or mpi", what, library));
  p.library = library == "nccl" ? CollectiveLibrary::Nccl : CollectiveLibrary::Mpi;
  p.gpus_per_node = static_cast<int>(number(doc, "gpus_per_node", what, 1, 1024));
  p.cores_per_node =
      doc.contains("cores_per_node") ? static_cast<int>(number(doc, "cores_per_node", what, 0, 1 << 20)) : 0;
  p.launch_latency_s = number(doc, "launch_latency_us", what, 0.0, 1e6) * 1e-6;
  if (doc.contains("ll_launch_latency_us"))
    p.ll_launch_latency_s = number(doc, "ll_launch_latency_us", what, 0.0, 1e6) * 1e-6;
  p.intra = parse_level(doc, "intra", what);
  p.inter = parse_level(doc, "inter", what);
  return p;
}

std::string network_profile_json(const NetworkProfile& p) {
  const nlohmann::json doc = {{"name", p.name},
                              {"description", p.description},
                              {"source", p.source},
                              {"library", std::string(library_name(p.library))},
                              {"gpus_per_node", p.gpus_per_node},
                              {"cores_per_node", p.cores_per_node},
                              {"launch_latency_us", p.launch_latency_s * 1e6},
                              {"ll_launch_latency_us", p.ll_launch_latency_s * 1e6},
                              {"intra", level_json(p.intra)},
                              {"inter", level_json(p.inter)}};
  return doc.dump(2) + "\n";
}

NetworkProfile load_network_profile(const std::string& spec, const std::string& option) {
  for (const auto& p : reference_networks())
    if (p.name == spec) return p;
  const std::string what = fmt::format("{} '{}'", option, spec);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(spec, ec)) {
    std::string names;
    for (const auto& p : reference_networks()) names += (names.empty() ? "" : ", ") + p.name;
    throw UsageError(fmt::format("{}: neither a file nor a reference network ({})", what, names));
  }
  return parse_network_profile(read_plan_input_file(spec, what, 1u << 20), what);
}

}  // namespace mnddp
