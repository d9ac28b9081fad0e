// The node-local level's writer: a node file per node, share files and partner copies at --zero 1|2,
// one atomic commit across the job.
#include "mnddp/ckpt/local_level.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "mnddp/check.hpp"
#include "mnddp/ckpt/file_transfer.hpp"
#include "mnddp/ckpt/local_files.hpp"
#include "mnddp/error.hpp"
#include "mnddp/safe_files.hpp"

namespace fs = std::filesystem;

namespace mnddp {
namespace {

using Kind = LocalFile::Kind;

// Removes the files of `paths` that exist; a failure here must not hide the error on its way.
void remove_quietly(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    std::error_code ignored;
    if (fs::symlink_status(path, ignored).type() == fs::file_type::regular) fs::remove(path, ignored);
  }
}

}  // namespace

NodeLayout node_layout(const std::vector<int>& node_of) {
  NodeLayout layout;
  layout.node_of = node_of;
  std::map<int, std::vector<int>> ranks_of;  // node -> its ranks, ascending
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r)
    ranks_of[node_of[static_cast<std::size_t>(r)]].push_back(r);
  layout.nodes = static_cast<int>(ranks_of.size());
  std::vector<int> order;  // node indices in ascending order
  for (const auto& [node, ranks] : ranks_of) order.push_back(node);
  layout.partner.assign(node_of.size(), -1);
  if (layout.nodes < 2) return layout;
  for (std::size_t n = 0; n < order.size(); ++n) {
    const auto& mine = ranks_of[order[n]];
    const auto& next = ranks_of[order[(n + 1) % order.size()]];
    for (std::size_t local = 0; local < mine.size(); ++local)
      layout.partner[static_cast<std::size_t>(mine[local])] = next[local % next.size()];
  }
  return layout;
}

std::vector<int> node_of_ranks(MpiComm& world, MpiComm& node) {
  // Nodes are numbered by their lowest rank, which every rank of a node learns from its node's root.
  std::int32_t leader = world.rank();
  node.broadcast(&leader, 1, DType::I32, 0);
  std::vector<std::int32_t> leaders(static_cast<std::size_t>(world.size()));
  world.allgather(&leader, leaders.data(), 1, DType::I32);
  std::vector<std::int32_t> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<int> node_of;
  for (const auto l : leaders)
    node_of.push_back(static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), l) - distinct.begin()));
  return node_of;
}

void claim_local_directory(const std::string& directory, const std::string& run) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error || !fs::is_directory(directory))
    throw UsageError(fmt::format("--local-checkpoint-dir: cannot create '{}': {}", directory,
                                 error ? error.message() : "not a directory"));
  const fs::path marker = fs::path(directory) / kLocalRunMarker;
  if (fs::symlink_status(marker, error).type() != fs::file_type::not_found) {
    std::ifstream in(marker);
    std::string owner;
    std::getline(in, owner);
    if (owner == run) return;
    throw UsageError(fmt::format(
        "--local-checkpoint-dir '{}' holds the node-local checkpoints of another run (--checkpoint-dir '{}'): give "
        "each run a directory of its own, e.g. /dev/shm/mnddp-$SLURM_JOB_ID",
        directory, owner.substr(0, 300)));
  }
  replace_file(directory, kLocalRunMarker, run + '\n');
}

LocalLevel::LocalLevel(LocalLevelOptions options, MPI_Comm parent)
    : options_(std::move(options)),
      world_(parent, "local checkpoint", ChannelPace::Background),
      self_(MPI_COMM_SELF, "local checkpoint self", ChannelPace::Background) {
  MNDDP_MPI_CHECK(
      MPI_Comm_split_type(world_.handle(), MPI_COMM_TYPE_SHARED, world_.rank(), MPI_INFO_NULL, &node_split_));
  node_ = std::make_unique<MpiComm>(node_split_, "local checkpoint node", ChannelPace::Background);
  MPI_Comm_free(&node_split_);
  const std::vector<int> node_of = node_of_ranks(world_, *node_);
  layout_ = node_layout(node_of);

  std::optional<Failure> failure;
  if (node_->is_root())
    failure = capture_failure([&] {
      claim_local_directory(options_.directory, options_.run);
      // A temporary from before this process is a write that never committed (its writer died).
      std::error_code error;
      for (const auto& entry : fs::directory_iterator(options_.directory, error)) {
        const std::string name = entry.path().filename().string();
        if (is_local_temporary(name) && entry.symlink_status(error).type() == fs::file_type::regular &&
            older_than_this_process(entry.path()))
          fs::remove(entry.path(), error);
      }
    });
  agree_on_failure(world_, failure);
  if (world_.is_root() && options_.sharded && layout_.nodes < 2)
    spdlog::warn(
        "--local-checkpoint-dir with --zero on one node: each rank's optimizer-state shares have no partner copy on "
        "another node, so the local level survives a crashed process but not the loss of the node");
}

LocalLevel::~LocalLevel() = default;

void LocalLevel::write(std::int64_t step, const Parts& parts) {
  const CollectiveLabel label(fmt::format("local checkpoint of step {}", step));
  const int me = world_.rank();
  const int world = world_.size();
  const auto path_of = [&](const std::string& name) { return (fs::path(options_.directory) / name).string(); };
  const std::string node_name = local_file_name(step, options_.sharded ? Kind::Base : Kind::Whole);
  std::vector<std::string> temporaries;                      // this rank's, removed on failure
  std::vector<std::pair<std::string, std::string>> renames;  // temporary -> final, on success
  const auto fail_if_any = [&](const std::optional<Failure>& failure) {
    try {
      agree_on_failure(world_, failure);
    } catch (const Error& e) {
      remove_quietly(temporaries);
      throw Error(fmt::format("node-local checkpoint of step {} not written ({}); the last complete one is intact",
                              step, e.what()),
                  e.exit_code(), /*collective=*/true);
    }
  };

  // 1. The node's file, by the node's first rank alone: every rank holds the same replicated state,
  // and one writer into memory or a local disk is faster than a collective one (no MPI-IO, no
  // agreement per array).
  std::optional<Failure> node_failure;
  if (node_->is_root()) {
    const std::string node_temporary = temporary_path(options_.directory, node_name);
    temporaries.push_back(node_temporary);
    renames.emplace_back(node_temporary, path_of(node_name));
    node_failure = capture_failure([&] {
      ParallelCheckpointWriter writer(self_, self_.handle(), node_temporary,
                                      ParallelCheckpointWriter::Create::Exclusive);
      parts.node_file(writer);
      writer.close();
    });
  }
  fail_if_any(node_failure);

  if (options_.sharded) {
    // 2. This rank's shares, then 3. a copy of them on the partner's node. The transfers go in rank
    // order on every rank, so each pair meets (disjoint pairs run at once) and none waits forever:
    // a failed one is remembered and the list goes on.
    const std::string own_name = local_file_name(step, Kind::Share, me, world);
    const std::string own_temporary = temporary_path(options_.directory, own_name);
    temporaries.push_back(own_temporary);
    renames.emplace_back(own_temporary, path_of(own_name));
    fail_if_any(capture_failure([&] {
      ParallelCheckpointWriter writer(self_, self_.handle(), own_temporary,
                                      ParallelCheckpointWriter::Create::Exclusive);
      parts.own_shares(writer);
      writer.close();
    }));
    std::optional<Failure> failure;
    for (int q = 0; q < world; ++q) {
      const int partner = layout_.partner[static_cast<std::size_t>(q)];
      if (partner < 0 || (me != q && me != partner)) continue;
      std::optional<Failure> this_one = capture_failure([&] {
        if (me == q) {
          send_file(world_, own_temporary, partner);
          return;
        }
        const std::string name = local_file_name(step, Kind::Share, q, world);
        const std::string temporary = temporary_path(options_.directory, name);
        temporaries.push_back(temporary);
        receive_file(world_, q, temporary);
        renames.emplace_back(temporary, path_of(name));
      });
      if (this_one && !failure) failure = this_one;
    }
    fail_if_any(failure);
  }

  // 4. Every piece of every node is written: publish them, and make sure all did before anything
  // older goes (a node that died between the two would otherwise leave no complete step).
  fail_if_any(capture_failure([&] {
    for (const auto& [from, to] : renames)
      if (std::rename(from.c_str(), to.c_str()) != 0)
        throw Error(fmt::format("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno)));
  }));
  world_.barrier();  // every node has renamed: the older steps may go
  if (node_->is_root()) prune(step);
}

void LocalLevel::prune(std::int64_t keep) {
  std::uint64_t kept_bytes = 0;
  for (const auto& file : list_local_files(options_.directory)) {
    const std::string path = (fs::path(options_.directory) / file.name).string();
    std::error_code error;
    if (file.step == keep) {
      kept_bytes += fs::file_size(path, error);
      continue;
    }
    fs::remove(path, error);
    if (error) spdlog::warn("node-local checkpoint '{}' could not be removed: {}", path, error.message());
  }
  node_bytes_ = kept_bytes;
}

}  // namespace mnddp
