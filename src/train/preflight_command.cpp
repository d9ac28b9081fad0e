// mnddp preflight: the checks, each rank's line, rank 0's verdict.
#include "mnddp/diagnose/preflight.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "mnddp/choices.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/comm/backend.hpp"
#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/data/data_paths.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/diagnose/link_test.hpp"
#include "mnddp/diagnose/network_measure.hpp"
#include "mnddp/error.hpp"
#include "mnddp/exit_codes.hpp"
#include "mnddp/log.hpp"
#include "mnddp/program_options_message.hpp"
#include "mnddp/task/task.hpp"
#include "mnddp/train/device.hpp"
#include "mnddp/watchdog.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct PreflightOptions {
  double link_mb = 16.0;
  double slow_below = 0.5;
  int slow_rank = -1;
  std::string save_network;  // mnddp plan's --network file
};

// Takes preflight's own options out of `args`; the rest, in their order, are train options (parsed
// afterwards by the train parser). Throws UsageError.
PreflightOptions take_preflight_options(std::vector<std::string>& args) {
  namespace po = boost::program_options;
  PreflightOptions options;
  po::options_description own;
  own.add_options()("link-mb", po::value(&options.link_mb))("slow-below", po::value(&options.slow_below))(
      "inject-slow-rank", po::value(&options.slow_rank))("save-network", po::value(&options.save_network));
  take_command_options(args, own, "mnddp preflight");  // names the option and the value
  if (options.link_mb <= 0 || options.link_mb > 4096)
    throw UsageError(fmt::format("mnddp preflight: --link-mb {:g} is outside (0, 4096]", options.link_mb));
  if (options.slow_below <= 0 || options.slow_below >= 1)
    throw UsageError(fmt::format("mnddp preflight: --slow-below {:g} is outside (0, 1)", options.slow_below));
  return options;
}

// Slurm's name for this node (what --exclude= takes), else the host name.
std::string node_name(const RankInfo& rank) {
  const char* slurm = std::getenv("SLURMD_NODENAME");
  return slurm != nullptr && *slurm != '\0' ? slurm : rank.host;
}

std::string check_device(const DeviceChoice& choice) {
  const auto begin = Clock::now();
  const at::Tensor ones = at::ones({1 << 20}, at::TensorOptions().device(choice.device));
  const double sum = ones.sum().item<double>();
  if (sum != static_cast<double>(1 << 20))
    throw Error(fmt::format("a sum of 2^20 ones on {} gave {}", choice.description, sum));
  return fmt::format("{}: a 4 MiB sum in {:.1f} ms", choice.description, seconds_since(begin) * 1e3);
}

// This rank's share of the shards (every n-th from its rank): opened, validated, labels read.
std::string check_files(const TrainingConfig& c, const RankInfo& rank) {
  std::vector<std::string> paths = expand_data_paths(c.train_data, "--train-data");
  if (!c.val_data.empty()) {
    const auto val = expand_data_paths(c.val_data, "--val-data");
    paths.insert(paths.end(), val.begin(), val.end());
  }
  std::vector<std::string> mine;
  for (std::size_t i = static_cast<std::size_t>(rank.rank); i < paths.size();
       i += static_cast<std::size_t>(rank.world_size))
    mine.push_back(paths[i]);
  const auto begin = Clock::now();
  if (!mine.empty()) scan_shards(mine, c.x_name, c.y_name, label_kind(c.task));
  return fmt::format("{} of {} shards read in {:.2f} s", mine.size(), paths.size(), seconds_since(begin));
}

// Rank 0: the checkpoint directory takes a file, and has room for two of its newest checkpoint.
std::string check_checkpoint_dir(const std::string& directory) {
  if (directory.empty()) return "no --checkpoint-dir";
  std::filesystem::create_directories(directory);
  const auto probe = std::filesystem::path(directory) / fmt::format(".preflight-{}", ::getpid());
  {
    std::ofstream out(probe);
    out << std::string(1 << 20, 'x');
    if (!out.flush()) throw UsageError(fmt::format("--checkpoint-dir '{}': cannot write a 1 MiB file", directory));
  }
  std::filesystem::remove(probe);
  struct statvfs fs {};
  if (::statvfs(directory.c_str(), &fs) != 0) return "writable (free space unknown)";
  const double free_gib = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) / (1 << 30);
  const auto committed = CheckpointManager::committed_in(directory);
  if (committed.empty()) return fmt::format("writable, {:.1f} GiB free", free_gib);
  const double newest_gib = static_cast<double>(std::filesystem::file_size(committed.back())) / (1 << 30);
  if (free_gib < 2 * newest_gib)
    throw UsageError(
        fmt::format("--checkpoint-dir '{}': {:.2f} GiB free, less than two of its newest checkpoint "
                    "({:.2f} GiB each)",
                    directory, free_gib, newest_gib));
  return fmt::format("writable, {:.1f} GiB free (newest checkpoint {:.2f} GiB)", free_gib, newest_gib);
}

// Runs `check`; its text, or "FAILED: why" (and `failed` set): one rank's failure is reported, not thrown.
template <typename F>
std::string attempt(F&& check, bool& failed) {
  try {
    return check();
  } catch (const std::exception& e) {
    failed = true;
    return fmt::format("FAILED: {}", e.what());
  }
}

}  // namespace

const char* preflight_usage() {
  return "Usage: mpirun -np N mnddp preflight [--link-mb MB] [--slow-below F] [train options]\n\n"
         "Checks, in seconds, what the training run with the same options will need: every rank's device,\n"
         "its share of the data files, the checkpoint directory (writable, room for two of its newest\n"
         "checkpoint) and the bandwidth between ranks over the training backend, in a ring and by pairs.\n"
         "Exit code 0 when fit, 5 otherwise, with the nodes to leave out as --exclude=NODES.\n"
         "  --link-mb MB         bytes per transfer of the link test (default 16)\n"
         "  --slow-below F       a link is slow under F times the median of its kind (default 0.5)\n"
         "  --save-network FILE  also measure latency and bandwidth by message size within and across\n"
         "                       nodes, and write them as 'mnddp plan --network FILE' reads them\n"
         "  --inject-slow-rank R testing aid: rank R waits before each transfer (0.5 s, or\n"
         "                       ten times its longest transfer of the round if longer)\n";
}

int preflight_command(Runtime& runtime, Watchdog& watchdog, std::vector<std::string> args) {
  MpiComm world;
  const RankInfo& rank = runtime.info();
  init_logging({rank.rank, rank.world_size, LogLevel::Info, false});
  if (std::ranges::any_of(args, [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    if (rank.is_root()) std::printf("%s", preflight_usage());
    return kExitOk;
  }
  PreflightOptions options;
  on_all_then_agree(world, [&] {
    options = take_preflight_options(args);
    if (!options.save_network.empty() && rank.world_size < 2)
      throw UsageError(
          fmt::format("mnddp preflight: --save-network '{}' measures links between ranks: launch 2 or more "
                      "(a node's ranks, and 2 nodes for the network between them)",
                      options.save_network));
  });
  std::string ini;
  on_root_then_agree(world, [&] { ini = to_ini(parse_command_line(args, environment_from_process()).config); });
  broadcast_string(world, ini, 0);
  const TrainingConfig config = parse_ini_text(ini);
  watchdog.set_timeout(config.collective_timeout);
  const auto begin = Clock::now();

  bool failed = false;
  DeviceChoice choice;
  const std::string device = attempt(
      [&] {
        choice = select_device(config.device, rank);
        return check_device(choice);
      },
      failed);
  const std::string files = attempt([&] { return check_files(config, rank); }, failed);
  bool checkpoint_failed = false;
  const std::string checkpoint =
      rank.is_root() ? attempt([&] { return check_checkpoint_dir(config.checkpoint_dir); }, checkpoint_failed) : "";

  // The links, over the backend training would use; not when a device failed (NCCL could not even
  // start there), which every rank must know alike.
  const auto hosts = allgather_strings(world, node_name(rank));
  std::int64_t device_failed = device.starts_with("FAILED") ? 1 : 0;
  world.allreduce(&device_failed, 1, DType::I64, ReduceOp::Max);
  Backend backend = Backend::Mpi;
  LinkJudgement links;
  LinkTestOptions link;
  NetworkProfile network;
  link.bytes = static_cast<std::size_t>(options.link_mb * (1 << 20));
  link.slow_rank = options.slow_rank;
  if (device_failed == 0) {
    backend = select_gradient_backend(config.backend, choice.cuda_index(), rank, world);
    const auto comm = make_gradient_comm(backend, world, choice.cuda_index(), config.collective_timeout);
    // Host memory for MPI (as training's copies: an MPI need not read GPU memory), device memory for NCCL.
    const auto buffer_options =
        at::TensorOptions().dtype(at::kByte).device(comm->uses_device_memory() ? choice.device : at::Device(at::kCPU));
    const at::Tensor send = at::ones({static_cast<std::int64_t>(link.bytes)}, buffer_options);
    at::Tensor recv = at::empty({static_cast<std::int64_t>(link.bytes)}, buffer_options);
    links = judge_links_twice([&] { return measure_links(*comm, world, send.data_ptr(), recv.data_ptr(), link); },
                              hosts, link.bytes, options.slow_below);
    if (!options.save_network.empty()) {
      network = measure_network(*comm, world, send.data_ptr(), recv.data_ptr(), link.bytes, hosts, rank,
                                backend == Backend::Nccl ? CollectiveLibrary::Nccl : CollectiveLibrary::Mpi);
      on_root_then_agree(world, [&] {
        if (!rank.is_root()) return;
        std::ofstream out(options.save_network);
        out << network_profile_json(network);
        if (!out.flush())
          throw UsageError(fmt::format("mnddp preflight: --save-network '{}' cannot be written", options.save_network));
      });
    }
  }

  const auto lines = allgather_strings(
      world, fmt::format("  rank {:<4} {:<12} device {}; files {}", rank.rank, node_name(rank), device, files));
  std::string failure;
  if (device.starts_with("FAILED: ")) failure = "device: " + device.substr(8);
  if (files.starts_with("FAILED: ")) failure += (failure.empty() ? "files: " : "; files: ") + files.substr(8);
  const auto failures = allgather_strings(world, failure);
  std::int64_t any_failed = failed || checkpoint_failed || !links.slow.empty() ? 1 : 0;
  world.allreduce(&any_failed, 1, DType::I64, ReduceOp::Max);
  if (rank.is_root()) {
    std::string text = fmt::format("preflight: {} ranks on {} node(s), backend {}, {:.1f} s\n", rank.world_size,
                                   rank.node_count, choice_name(backend), seconds_since(begin));
    for (const auto& line : lines) text += line + "\n";
    text += fmt::format("  checkpoint dir: {}\n", checkpoint);
    const auto gbps = [](double value) { return value > 0 ? fmt::format("{:.2f} GB/s", value) : std::string("none"); };
    if (device_failed != 0) text += "  links: not measured (a device failed)\n";
    if (device_failed == 0)
      text += fmt::format(
          "  links ({:g} MiB a transfer): ring median {}, slowest {} from rank {}; pairs median {} within a node, {} "
          "across nodes\n",
          options.link_mb, gbps(links.ring_median_gbps), gbps(links.ring_min_gbps), links.ring_min_rank,
          gbps(links.pair_median_same_host), gbps(links.pair_median_cross_host));
    if (!options.save_network.empty() && device_failed == 0)
      text += fmt::format(
          "  network: within a node {:.1f} us a hop, {:.2f} GB/s; across nodes {:.1f} us, {:.2f} GB/s: written to {}\n",
          network.intra.latency_s * 1e6, network.intra.bandwidth_Bps / 1e9, network.inter.latency_s * 1e6,
          network.inter.bandwidth_Bps / 1e9, options.save_network);
    for (const auto& l : links.slow)
      text += fmt::format("  slow link: rank {} ({}) - rank {} ({}): {:.3f} GB/s against a median of {:.2f} {}{}\n",
                          l.a, hosts[l.a], l.b, hosts[l.b], l.gbps, l.median_gbps,
                          l.same_host ? "within a node" : "across nodes",
                          links.passes > 1 ? " (the faster of two passes)" : "");
    if (any_failed == 0) {
      text += "preflight: passed\n";
    } else {
      // Ranks that failed alike in one reason: "ranks 0, 1 (n1): files: --train-data: ...".
      std::vector<std::string> reasons;
      std::map<std::string, std::vector<int>> alike;
      for (std::size_t r = 0; r < failures.size(); ++r)
        if (!failures[r].empty()) alike[failures[r]].push_back(static_cast<int>(r));
      for (const auto& [why, ranks] : alike) {
        std::vector<std::string> nodes;
        for (int r : ranks)
          if (std::ranges::find(nodes, hosts[r]) == nodes.end()) nodes.push_back(hosts[r]);
        reasons.push_back(fmt::format("{} {} ({}): {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "),
                                      fmt::join(nodes, ", "), why));
      }
      if (checkpoint_failed) reasons.push_back("checkpoint dir " + checkpoint);
      for (int r : links.blamed_ranks)
        reasons.push_back(fmt::format("rank {} on {}: most of its links are slow", r, hosts[r]));
      if (links.blamed_ranks.empty() && !links.slow.empty())
        reasons.push_back(
            fmt::format("{} slow link(s), no one node behind most of them (a cable or a switch?)", links.slow.size()));
      // Failing devices or files point at their nodes too.
      std::vector<std::string> exclude = links.exclude;
      // ... unless every rank failed (a wrong path is not a bad node).
      const bool everywhere = std::ranges::none_of(failures, [](const std::string& f) { return f.empty(); });
      for (std::size_t r = 0; r < failures.size() && !everywhere; ++r)
        if (!failures[r].empty() && std::ranges::find(exclude, hosts[r]) == exclude.end()) exclude.push_back(hosts[r]);
      text += fmt::format("preflight: FAILED: {}\n", fmt::join(reasons, "; "));
      if (!exclude.empty()) text += fmt::format("exclude: --exclude={}\n", fmt::join(exclude, ","));
    }
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
  return any_failed != 0 ? kExitPreflight : kExitOk;
}

}  // namespace mnddp
