// The newest node-local checkpoint that survives, and the transfers that give every node all of it.
#include "mnddp/ckpt/local_restore_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace mnddp {
namespace {

using Kind = LocalFile::Kind;

// The nodes that hold a file matching `want`.
std::vector<int> holders(const std::vector<NodeLocalFiles>& nodes, const std::function<bool(const LocalFile&)>& want) {
  std::vector<int> found;
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n)
    if (std::ranges::any_of(nodes[static_cast<std::size_t>(n)].files, want)) found.push_back(n);
  return found;
}

// Gives every node that lacks `name` a copy from one of `have`, spreading the senders by `spread`
// (a node, a share) so that one survivor does not send everything when several could.
void send_to_the_rest(const std::vector<NodeLocalFiles>& nodes, const std::vector<int>& have, const std::string& name,
                      int spread, std::vector<LocalTransfer>& transfers) {
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (std::ranges::find(have, n) != have.end()) continue;
    const int from = have[static_cast<std::size_t>(n + spread) % have.size()];
    transfers.push_back({from, n, name});
  }
}

}  // namespace

LocalRestorePlan plan_local_restore(const std::vector<NodeLocalFiles>& nodes) {
  std::set<std::int64_t, std::greater<>> steps;
  for (const auto& node : nodes)
    for (const auto& file : node.files) steps.insert(file.step);

  LocalRestorePlan plan;
  for (const std::int64_t step : steps) {
    // Every shortfall of the step, so that the newest one's report is complete (a base still being
    // written and shares lost with their nodes can both be true).
    std::vector<std::string> lacks;
    // A whole file anywhere is all it takes.
    const auto whole = holders(nodes, [&](const LocalFile& f) { return f.step == step && f.kind == Kind::Whole; });
    if (!whole.empty()) {
      plan.step = step;
      send_to_the_rest(nodes, whole, local_file_name(step, Kind::Whole), 0, plan.transfers);
      return plan;
    }
    // Otherwise a base and every share of one old world size.
    const auto base = holders(nodes, [&](const LocalFile& f) { return f.step == step && f.kind == Kind::Base; });
    std::set<int> world_sizes;
    for (const auto& node : nodes)
      for (const auto& f : node.files)
        if (f.step == step && f.kind == Kind::Share) world_sizes.insert(f.of);
    if (base.empty()) lacks.push_back(fmt::format("no surviving node holds {}", local_file_name(step, Kind::Base)));
    for (const int of : world_sizes) {
      std::vector<std::vector<int>> share_holders;
      std::vector<int> missing;
      for (int r = 0; r < of; ++r) {
        share_holders.push_back(holders(nodes, [&](const LocalFile& f) {
          return f.step == step && f.kind == Kind::Share && f.share == r && f.of == of;
        }));
        if (share_holders.back().empty()) missing.push_back(r);
      }
      if (!missing.empty()) {
        lacks.push_back(
            missing.size() == 1
                ? fmt::format("rank {}'s share (of {}) is on no surviving node", missing[0], of)
                : fmt::format("the shares of ranks {} (of {}) are on no surviving node", fmt::join(missing, ", "), of));
        continue;
      }
      if (base.empty()) continue;
      plan.step = step;
      plan.assemble = true;
      plan.shares = of;
      send_to_the_rest(nodes, base, local_file_name(step, Kind::Base), 0, plan.transfers);
      for (int r = 0; r < of; ++r)
        send_to_the_rest(nodes, share_holders[static_cast<std::size_t>(r)], local_file_name(step, Kind::Share, r, of),
                         r, plan.transfers);
      return plan;
    }
    if (lacks.empty()) lacks.push_back(fmt::format("no share of step {} survives", step));
    // Only the newest candidate's shortfall is reported: it is the one a reader expects to find.
    if (plan.why_not.empty()) plan.why_not = fmt::format("step {}: {}", step, fmt::join(lacks, "; "));
  }
  return plan;
}

}  // namespace mnddp
