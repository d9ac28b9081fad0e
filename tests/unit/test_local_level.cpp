// The node-local level's pure parts: its file names, the partner of every rank, the share index, and
// the restore plan (which step survives, which node sends what), checked against cases worked out by
// hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/local_capacity.hpp"
#include "mnddp/ckpt/local_files.hpp"
#include "mnddp/ckpt/local_level.hpp"
#include "mnddp/ckpt/local_restore_plan.hpp"
#include "mnddp/ckpt/share_index.hpp"
#include "mnddp/observe/checkpoint_advice.hpp"
#include "test_support.hpp"

using namespace mnddp;
using mnddp::testing_support::TempDir;
using Kind = LocalFile::Kind;

TEST(LocalFiles, NamesRoundTripAndNothingElseParses) {
  EXPECT_EQ(local_file_name(120, Kind::Whole), "step-00000120.h5");
  EXPECT_EQ(local_file_name(120, Kind::Base), "step-00000120.base.h5");
  EXPECT_EQ(local_file_name(120, Kind::Share, 3, 4), "step-00000120.share-000003-of-000004.h5");
  for (const auto& file : {local_file(7, Kind::Whole), local_file(7, Kind::Base), local_file(7, Kind::Share, 0, 1),
                           local_file(123456789, Kind::Share, 511, 512)}) {
    const auto parsed = parse_local_file_name(file.name);
    ASSERT_TRUE(parsed) << file.name;
    EXPECT_EQ(*parsed, file);
  }
  for (const char* name : {"step-00000120.h5.0123456789abcdef.tmp", "latest", "run", "step-120.h5",
                           "step-00000120.share-000004-of-000004.h5", "step-00000120.share-000000-of-000000.h5",
                           "step-000000120.h5", "../step-00000120.h5", "step-00000120.base.h5x", ""})
    EXPECT_FALSE(parse_local_file_name(name)) << name;
  EXPECT_TRUE(is_local_temporary("step-00000120.base.h5.0123456789abcdef.tmp"));
  EXPECT_TRUE(is_local_temporary("run.0123456789abcdef.tmp"));
  EXPECT_FALSE(is_local_temporary("data.h5.0123456789abcdef.tmp"));
  EXPECT_FALSE(is_local_temporary("step-00000120.h5"));
}

TEST(LocalFiles, ListingTakesOnlyCommittedRegularFiles) {
  const TempDir dir;
  const auto touch = [&](const std::string& name) { std::ofstream(dir.file(name)) << "x"; };
  touch("step-00000010.h5");
  touch("step-00000012.base.h5");
  touch("step-00000012.h5.0123456789abcdef.tmp");
  touch("notes.txt");
  std::filesystem::create_symlink("/etc/passwd", dir.file("step-00000014.h5"));
  std::filesystem::create_directory(dir.file("step-00000016.h5"));
  const auto files = list_local_files(dir.path().string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "step-00000010.h5");
  EXPECT_EQ(files[1].name, "step-00000012.base.h5");
  EXPECT_TRUE(list_local_files(dir.file("missing")).empty());
}

TEST(LocalFiles, AnotherRunsDirectoryIsRefusedAndOursIsKept) {
  const TempDir dir;
  const std::string local = dir.file("node");
  claim_local_directory(local, "/runs/a/checkpoints");
  claim_local_directory(local, "/runs/a/checkpoints");  // ours again: fine
  try {
    claim_local_directory(local, "/runs/b/checkpoints");
    FAIL() << "another run's directory was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--local-checkpoint-dir"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/runs/a/checkpoints"), std::string::npos) << e.what();
  }
}

TEST(NodeLayout, EachRankCopiesToTheSameLocalRankOnTheNextNode) {
  // 3 nodes of 2: ranks 0,1 | 2,3 | 4,5 -> 2,3 | 4,5 | 0,1.
  const NodeLayout three = node_layout({0, 0, 1, 1, 2, 2});
  EXPECT_EQ(three.nodes, 3);
  EXPECT_EQ(three.partner, (std::vector<int>{2, 3, 4, 5, 0, 1}));
  // Uneven nodes: 3 ranks then 1: the one rank of node 1 takes all three copies; it copies to rank 0.
  const NodeLayout uneven = node_layout({0, 0, 0, 1});
  EXPECT_EQ(uneven.partner, (std::vector<int>{3, 3, 3, 0}));
  // One node: nobody to copy to.
  EXPECT_EQ(node_layout({0, 0}).partner, (std::vector<int>{-1, -1}));
  // A partner is never on its own rank's node.
  const NodeLayout mixed = node_layout({0, 1, 0, 1, 2});
  for (std::size_t r = 0; r < mixed.partner.size(); ++r)
    EXPECT_NE(mixed.node_of[r], mixed.node_of[static_cast<std::size_t>(mixed.partner[r])]) << r;
}

TEST(ShareIndex, RoundTripsAndRefusesClaimsOutsideTheArray) {
  const std::vector<ShareIndexEntry> entries{{"optimizer/w/exp_avg", {4, 3}, 6, 6}, {"optimizer/b/exp_avg", {3}, 3, 0}};
  EXPECT_EQ(share_index_from_json(share_index_to_json(entries), "f"), entries);
  for (const char* bad : {"{}", "[{\"path\":\"a\",\"shape\":[4],\"first\":3,\"count\":2}]",
                          "[{\"path\":\"a\",\"shape\":[4],\"first\":-1,\"count\":1}]",
                          "[{\"path\":\"a\",\"shape\":[-4],\"first\":0,\"count\":1}]",
                          "[{\"path\":\"a\",\"shape\":[4611686018427387904,4],\"first\":0,\"count\":1}]",
                          "[{\"path\":\"a\",\"shape\":[4],\"first\":0}]", "not json"})
    EXPECT_THROW(share_index_from_json(bad, "f"), CorruptCheckpoint) << bad;
}

namespace {

NodeLocalFiles node(const std::string& host, int leader, std::vector<LocalFile> files) {
  return {host, leader, std::move(files)};
}

}  // namespace

TEST(LocalRestorePlan, TheNewestWholeFileGoesToEveryNodeWithoutIt) {
  // n1 kept steps 10 and 20; the spare n3 has nothing; n2 (lost) is not in the new run.
  const auto plan = plan_local_restore(
      {node("n1", 0, {local_file(10, Kind::Whole), local_file(20, Kind::Whole)}), node("n3", 2, {})});
  EXPECT_EQ(plan.step, 20);
  EXPECT_FALSE(plan.assemble);
  ASSERT_EQ(plan.transfers.size(), 1u);
  EXPECT_EQ(plan.transfers[0].from_node, 0);
  EXPECT_EQ(plan.transfers[0].to_node, 1);
  EXPECT_EQ(plan.transfers[0].name, "step-00000020.h5");
  EXPECT_TRUE(plan.why_not.empty());
}

TEST(LocalRestorePlan, NodesThatAllHoldItMoveNothing) {
  const auto plan =
      plan_local_restore({node("n1", 0, {local_file(20, Kind::Whole)}), node("n2", 2, {local_file(20, Kind::Whole)})});
  EXPECT_EQ(plan.step, 20);
  EXPECT_TRUE(plan.transfers.empty());
}

TEST(LocalRestorePlan, ShardedPiecesComeFromTheirNodeOrTheirPartner) {
  // A 4-rank --zero run on n1 (ranks 0,1) and n2 (ranks 2,3): each node holds its own shares and
  // its partner's copies of the other node's. n2 is lost; n1 and the spare n3 go on.
  const std::vector<LocalFile> n1_files{local_file(30, Kind::Base), local_file(30, Kind::Share, 0, 4),
                                        local_file(30, Kind::Share, 1, 4), local_file(30, Kind::Share, 2, 4),
                                        local_file(30, Kind::Share, 3, 4)};
  const auto plan = plan_local_restore({node("n1", 0, n1_files), node("n3", 2, {})});
  EXPECT_EQ(plan.step, 30);
  EXPECT_TRUE(plan.assemble);
  EXPECT_EQ(plan.shares, 4);
  ASSERT_EQ(plan.transfers.size(), 5u);  // the base and the 4 shares, all from n1 to n3
  for (const auto& t : plan.transfers) {
    EXPECT_EQ(t.from_node, 0);
    EXPECT_EQ(t.to_node, 1);
  }
  EXPECT_EQ(plan.transfers[0].name, "step-00000030.base.h5");
  EXPECT_EQ(plan.transfers[4].name, "step-00000030.share-000003-of-000004.h5");
}

TEST(LocalRestorePlan, AShareLostWithItsPartnerFallsBackToAnOlderStepOrNothing) {
  // Step 40 lacks rank 3's share anywhere; step 30 is whole on n1.
  const auto older = plan_local_restore(
      {node("n1", 0,
            {local_file(30, Kind::Whole), local_file(40, Kind::Base), local_file(40, Kind::Share, 0, 4),
             local_file(40, Kind::Share, 1, 4), local_file(40, Kind::Share, 2, 4)}),
       node("n3", 2, {})});
  EXPECT_EQ(older.step, 30);
  EXPECT_NE(older.why_not.find("step 40: rank 3's share (of 4)"), std::string::npos) << older.why_not;
  // Only step 40: nothing to restore, and why.
  const auto none = plan_local_restore(
      {node("n1", 0, {local_file(40, Kind::Base), local_file(40, Kind::Share, 0, 2)}), node("n3", 2, {})});
  EXPECT_EQ(none.step, -1);
  EXPECT_NE(none.why_not.find("rank 1's share (of 2) is on no surviving node"), std::string::npos) << none.why_not;
  EXPECT_TRUE(none.transfers.empty());
  // Shares without a base.
  const auto no_base = plan_local_restore({node("n1", 0, {local_file(40, Kind::Share, 0, 1)})});
  EXPECT_EQ(no_base.step, -1);
  EXPECT_NE(no_base.why_not.find("no surviving node holds step-00000040.base.h5"), std::string::npos)
      << no_base.why_not;
  EXPECT_EQ(plan_local_restore({node("n1", 0, {}), node("n2", 1, {})}).why_not, "");
}

// The newest step's report names all it lacks: n1 was still writing its base when n2 (and with
// it n2's shares and their partner copies) was lost.
TEST(LocalRestorePlan, TheReportNamesEveryShortfallOfTheNewestStep) {
  const auto plan = plan_local_restore(
      {node("n1", 0, {local_file(40, Kind::Share, 0, 4), local_file(40, Kind::Share, 1, 4)}), node("n3", 2, {})});
  EXPECT_EQ(plan.step, -1);
  EXPECT_EQ(plan.why_not,
            "step 40: no surviving node holds step-00000040.base.h5; the shares of ranks 2, 3 (of 4) are on no "
            "surviving node");
}

TEST(LocalRestorePlan, SendersAreSpreadOverTheNodesThatHoldAPiece) {
  // Both n1 and n2 hold step 50; n3 and n4 are new: each gets it from a different node.
  const auto plan =
      plan_local_restore({node("n1", 0, {local_file(50, Kind::Whole)}), node("n2", 1, {local_file(50, Kind::Whole)}),
                          node("n3", 2, {}), node("n4", 3, {})});
  ASSERT_EQ(plan.transfers.size(), 2u);
  EXPECT_NE(plan.transfers[0].from_node, plan.transfers[1].from_node);
}

TEST(CheckpointAdvice, YoungsIntervalFromTheMeasuredCostAndTheWritersCommitAsAFloor) {
  // C = 0.05 s, M = 24 h: sqrt(2 x 0.05 x 86400) = sqrt(8640) = 92.95 s; at 0.1 s a step, 930 steps.
  const IntervalAdvice advice = advise_interval({4, 0.2, 4, 2.0}, 24.0, 0.1);
  EXPECT_NEAR(advice.cost_s, 0.05, 1e-12);
  EXPECT_NEAR(advice.seconds, 92.95, 0.01);
  EXPECT_EQ(advice.steps, 930);
  EXPECT_FALSE(advice.commit_bound);
  // A commit of 200 s each is longer than Young's interval: the writer could not keep up with it.
  const IntervalAdvice bound = advise_interval({2, 0.1, 2, 400.0}, 24.0, 0.1);
  EXPECT_TRUE(bound.commit_bound);
  EXPECT_DOUBLE_EQ(bound.seconds, 200.0);
  EXPECT_EQ(advise_interval({}, 24.0, 0.1).steps, 0);
  const std::string text = checkpoint_advice_text({{4, 0.2, 4, 2.0}, {1, 0.5, 1, 3.0}}, 24.0, 0.1, 10, 100);
  EXPECT_NE(text.find("node-local 0.050 s blocked each (4 taken): every 93 s (about 930 steps; this run: every 10)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("file system 0.500 s blocked each"), std::string::npos) << text;
  EXPECT_EQ(checkpoint_advice_text({}, 24.0, 0.1, 10, 100), "");
}

TEST(LocalCapacity, TwoCheckpointsMustFitOnDiskAndInMemoryBesideTraining) {
  LocalCapacity c;
  c.checkpoint_bytes = 3ull << 30;
  c.free_bytes = 7ull << 30;
  c.available_bytes = 8ull << 30;
  c.beside_bytes = 1ull << 30;
  EXPECT_FALSE(local_capacity_shortfall(c, "/local", "n1"));  // a disk: 6 GiB of 7 free
  c.in_memory = true;
  EXPECT_FALSE(local_capacity_shortfall(c, "/dev/shm/x", "n1"));  // 6 + 1 of 8 available
  c.beside_bytes = 3ull << 30;                                    // 6 + 3 > 8
  const auto memory = local_capacity_shortfall(c, "/dev/shm/x", "n1");
  ASSERT_TRUE(memory);
  EXPECT_NE(memory->find("--local-checkpoint-dir '/dev/shm/x' is in memory"), std::string::npos) << *memory;
  EXPECT_NE(memory->find("need 9.00 GiB, and the node has 8.00 GiB available"), std::string::npos) << *memory;
  c.free_bytes = 5ull << 30;  // 6 > 5
  const auto disk = local_capacity_shortfall(c, "/dev/shm/x", "n1");
  ASSERT_TRUE(disk);
  EXPECT_NE(disk->find("two node-local checkpoints need 6.00 GiB on n1"), std::string::npos) << *disk;
}

TEST(LocalCapacity, DevShmIsMemory) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm here";
  const LocalCapacity c = measure_local_capacity("/dev/shm");
  EXPECT_TRUE(c.in_memory);
  EXPECT_GT(c.available_bytes, 0u);
}
