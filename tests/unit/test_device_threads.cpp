// The thread counts a rank resolves (train/device.hpp): torch threads, decode threads, and whether
// its communication thread has a core of its own, from Slurm's allocation or the node's share.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "mnddp/train/device.hpp"

namespace mnddp {
namespace {

const int kNodeCores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

RankInfo ranks_on_node(int local_size) {
  RankInfo rank;
  rank.local_size = local_size;
  rank.world_size = local_size;
  return rank;
}

TEST(DeviceThreads, TorchThreadsFromSlurmThenOmpThenTheNodeShare) {
  const RankInfo alone = ranks_on_node(1);
  EXPECT_EQ(resolve_threads(3, alone, {{"SLURM_CPUS_PER_TASK", "8"}}), 3);  // --threads wins
  EXPECT_EQ(resolve_threads(0, alone, {{"SLURM_CPUS_PER_TASK", "8"}, {"OMP_NUM_THREADS", "2"}}), 8);
  EXPECT_EQ(resolve_threads(0, alone, {{"OMP_NUM_THREADS", "2"}}), 2);
  EXPECT_EQ(resolve_threads(0, alone, {}), kNodeCores);
  EXPECT_EQ(resolve_threads(0, ranks_on_node(kNodeCores * 4), {}), 1);  // at least one
}

TEST(DeviceThreads, LoaderThreadsAreTheRanksCoresLessTorchs) {
  EXPECT_EQ(resolve_loader_threads(0, 2, ranks_on_node(1), {{"SLURM_CPUS_PER_TASK", "8"}}), 6);
  EXPECT_EQ(resolve_loader_threads(0, 8, ranks_on_node(1), {{"SLURM_CPUS_PER_TASK", "8"}}), 1);  // at least one
  EXPECT_EQ(resolve_loader_threads(5, 8, ranks_on_node(1), {}), 5);
}

// Slurm's cgroup gives the rank --cpus-per-task cores, whatever the node has: that decides.
TEST(DeviceThreads, SpareCoreFollowsSlurmsAllocation) {
  const RankInfo crowded = ranks_on_node(kNodeCores);  // one core a rank by the node's share
  EXPECT_FALSE(spare_core_per_rank(1, crowded, {}));
  EXPECT_TRUE(spare_core_per_rank(1, crowded, {{"SLURM_CPUS_PER_TASK", "2"}}));
  EXPECT_FALSE(spare_core_per_rank(2, crowded, {{"SLURM_CPUS_PER_TASK", "2"}}));
  // A rank alone on a big node with Slurm's one core: no spare core, though the node has many.
  EXPECT_FALSE(spare_core_per_rank(1, ranks_on_node(1), {{"SLURM_CPUS_PER_TASK", "1"}}));
  if (kNodeCores >= 2) {
    EXPECT_TRUE(spare_core_per_rank(1, ranks_on_node(1), {}));
  }
}

}  // namespace
}  // namespace mnddp
