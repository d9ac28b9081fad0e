// Restoring from the node-local level: list, plan, move the pieces, assemble, describe.
#include "mnddp/ckpt/local_restore.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "mnddp/check.hpp"
#include "mnddp/ckpt/file_transfer.hpp"
#include "mnddp/ckpt/local_assembly.hpp"
#include "mnddp/ckpt/local_files.hpp"
#include "mnddp/ckpt/local_level.hpp"
#include "mnddp/ckpt/local_restore_plan.hpp"
#include "mnddp/error.hpp"
#include "mnddp/safe_files.hpp"

namespace fs = std::filesystem;

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Slurm's name for this node (what --exclude= takes and the resilient script logs), else the host's.
std::string node_name() {
  if (const char* slurm = std::getenv("SLURMD_NODENAME"); slurm != nullptr && *slurm != '\0') return slurm;
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// What this node's directory offers the restore: its files when it belongs to `run`; nothing when it
// is missing or unclaimed (no marker: not written by this run). Another run's: UsageError.
std::vector<LocalFile> offered_files(const std::string& directory, const std::string& run) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) return {};
  const fs::path marker = fs::path(directory) / kLocalRunMarker;
  if (fs::symlink_status(marker, error).type() == fs::file_type::not_found) return {};
  claim_local_directory(directory, run);  // throws for another run's directory
  return list_local_files(directory);
}

// "ranks 0-1", "rank 2", "ranks 0, 2"
std::string describe_ranks(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  bool consecutive = true;
  for (std::size_t i = 1; i < ranks.size(); ++i) consecutive = consecutive && ranks[i] == ranks[i - 1] + 1;
  return consecutive ? fmt::format("ranks {}-{}", ranks.front(), ranks.back())
                     : fmt::format("ranks {}", fmt::join(ranks, ", "));
}

}  // namespace

LocalRestore restore_local_level(MpiComm& control, const std::string& directory, const std::string& run) {
  const auto started = Clock::now();
  const CollectiveLabel label("node-local checkpoint restore");
  MPI_Comm split = MPI_COMM_NULL;
  MNDDP_MPI_CHECK(MPI_Comm_split_type(control.handle(), MPI_COMM_TYPE_SHARED, control.rank(), MPI_INFO_NULL, &split));
  MpiComm node(split, "local restore node");
  MPI_Comm_free(&split);
  // The transfers involve some ranks only: on a channel of their own, so that the control channel's
  // call sequence stays the same on every rank (the consistency check compares it).
  MpiComm transfers(control.handle(), "local restore transfers", ChannelPace::Background);
  const std::vector<int> node_of = node_of_ranks(control, node);
  const bool leader = node.is_root();

  // 1. Each node's listing, as "<host>\n<file>\n<file>..." from its leader (the others send "").
  std::vector<LocalFile> mine;
  std::optional<Failure> failure;
  if (leader) failure = capture_failure([&] { mine = offered_files(directory, run); });
  agree_on_failure(control, failure);
  std::string listing;
  if (leader) {
    listing = node_name();
    for (const auto& file : mine) listing += '\n' + file.name;
  }
  const std::vector<std::string> listings = allgather_strings(control, listing);
  std::vector<NodeLocalFiles> nodes;
  for (int r = 0; r < control.size(); ++r) {
    const std::string& text = listings[static_cast<std::size_t>(r)];
    if (text.empty()) continue;
    std::istringstream lines(text);
    NodeLocalFiles entry;
    entry.leader = r;
    std::getline(lines, entry.host);
    for (std::string name; std::getline(lines, name);)
      if (auto file = parse_local_file_name(name)) entry.files.push_back(*file);
    nodes.push_back(std::move(entry));
  }

  // 2. The same plan on every rank.
  const LocalRestorePlan plan = plan_local_restore(nodes);
  LocalRestore result;
  if (plan.step < 0) {
    result.summary = plan.why_not.empty()
                         ? "the node-local level holds no checkpoint of this run"
                         : fmt::format("the node-local level has no complete checkpoint ({})", plan.why_not);
    return result;
  }
  const std::string whole_name = local_file_name(plan.step, LocalFile::Kind::Whole);
  const std::string whole_path = (fs::path(directory) / whole_name).string();

  // 3. The transfers, in plan order on every rank; a failed one is remembered and the list goes on.
  std::uint64_t received = 0;
  double receiving_s = 0.0;
  std::set<std::string> senders;
  for (const auto& transfer : plan.transfers) {
    const int from = nodes[static_cast<std::size_t>(transfer.from_node)].leader;
    const int to = nodes[static_cast<std::size_t>(transfer.to_node)].leader;
    if (control.rank() != from && control.rank() != to) continue;
    std::optional<Failure> this_one = capture_failure([&] {
      if (control.rank() == from) {
        send_file(transfers, (fs::path(directory) / transfer.name).string(), to);
        return;
      }
      const auto begin = Clock::now();
      std::error_code ignored;
      fs::create_directories(directory, ignored);
      const std::string temporary = temporary_path(directory, transfer.name);
      received += receive_file(transfers, from, temporary);
      const std::string final_path = (fs::path(directory) / transfer.name).string();
      if (std::rename(temporary.c_str(), final_path.c_str()) != 0) {
        fs::remove(temporary, ignored);
        throw Error(fmt::format("cannot rename '{}' to '{}'", temporary, final_path));
      }
      receiving_s += seconds_since(begin);
      senders.insert(nodes[static_cast<std::size_t>(transfer.from_node)].host);
    });
    if (this_one && !failure) failure = this_one;
  }
  // 4. At --zero 1|2 each node builds the whole file from its (now complete) pieces.
  double assembling_s = 0.0;
  if (leader && !failure && plan.assemble && !fs::exists(whole_path))
    failure = capture_failure([&] {
      const auto begin = Clock::now();
      MpiComm self(MPI_COMM_SELF, "local restore self");
      const std::string temporary = temporary_path(directory, whole_name);
      try {
        assemble_local_checkpoint(directory, plan.step, plan.shares, self, temporary);
      } catch (...) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        throw;
      }
      if (std::rename(temporary.c_str(), whole_path.c_str()) != 0)
        throw Error(fmt::format("cannot rename '{}' to '{}'", temporary, whole_path));
      assembling_s = seconds_since(begin);
    });
  try {
    agree_on_failure(control, failure);
  } catch (const Error& e) {
    result.summary = fmt::format("the node-local checkpoint of step {} could not be gathered: {}", plan.step, e.what());
    return result;
  }

  // 5. One line: where each node's copy came from, and how long it took.
  std::string part;
  if (leader) {
    std::vector<int> ranks;
    for (int r = 0; r < control.size(); ++r)
      if (node_of[static_cast<std::size_t>(r)] == node_of[static_cast<std::size_t>(control.rank())]) ranks.push_back(r);
    const std::string who = fmt::format("{} ({})", node_name(), describe_ranks(ranks));
    if (senders.empty())
      part = fmt::format("{} its own copy", who);
    else
      part = fmt::format("{} {}'s copy ({:.1f} MB in {:.2f} s)", who, fmt::join(senders, " and "),
                         static_cast<double>(received) / 1e6, receiving_s);
    if (plan.assemble && assembling_s > 0)
      part += fmt::format(", assembled from the base and {} shares in {:.2f} s", plan.shares, assembling_s);
  }
  std::vector<std::string> parts;
  for (auto& p : allgather_strings(control, part))
    if (!p.empty()) parts.push_back(std::move(p));
  result.path = whole_path;
  result.step = plan.step;
  result.summary =
      fmt::format("step {} from the node-local level in {:.2f} s: {}{}", plan.step, seconds_since(started),
                  fmt::join(parts, "; "), plan.why_not.empty() ? "" : fmt::format(" (newer: {})", plan.why_not));
  return result;
}

}  // namespace mnddp
