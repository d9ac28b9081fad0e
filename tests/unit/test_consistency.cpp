// The consistency check's parts that need no MPI: the reduction message's wire form and combine
// step, the running call hashes and ring buffer of a tracker, and the wording of a verdict (rank
// ranges, groups, the first differing call).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/reduction_message.hpp"
#include "mnddp/diagnose/consistency_check.hpp"

using namespace mnddp;

namespace {

// Combines b into a as MPI would (a is the in-out side) and decodes into `into`.
void reduce_into(ReductionMessage& into, const ReductionMessage& other) {
  std::vector<unsigned char> mine = into.encode();
  std::vector<unsigned char> theirs = other.encode();
  int one = 1;
  ReductionMessage::combine(theirs.data(), mine.data(), &one, nullptr);
  into.decode(mine);
}

ChannelHistory history(std::uint64_t started, std::vector<std::pair<std::uint64_t, const char*>> calls) {
  ChannelHistory h;
  h.started = started;
  std::uint64_t hash = 1;
  for (const auto& [seq, label] : calls) {
    CollectiveHistoryEntry e;
    e.seq = seq;
    hash = hash * 1099511628211ull + std::strlen(label) * 31 + static_cast<unsigned char>(label[0]);
    e.hash = hash;
    e.bytes = 8;
    std::strcpy(e.op, "allreduce");
    std::strncpy(e.label, label, sizeof(e.label) - 1);
    h.calls.push_back(e);
  }
  return h;
}

}  // namespace

TEST(ReductionMessage, SumsMinMaxAndMaxRankCombine) {
  ReductionMessage a, b;
  a.add_sum(1.5);
  a.add_min_max(7);
  a.add_max_rank(2.0, 0);
  a.add_max_rank(3.0, 0);
  b.add_sum(2.5);
  b.add_min_max(3);
  b.add_max_rank(5.0, 1);
  b.add_max_rank(3.0, 1);  // a tie goes to the lower rank
  reduce_into(a, b);
  ASSERT_TRUE(a.layout_agreed());
  EXPECT_DOUBLE_EQ(a.sum(0), 4.0);
  EXPECT_EQ(a.min(0), 3u);
  EXPECT_EQ(a.max(0), 7u);
  EXPECT_DOUBLE_EQ(a.max_value(0), 5.0);
  EXPECT_EQ(a.max_rank(0), 1);
  EXPECT_DOUBLE_EQ(a.max_value(1), 3.0);
  EXPECT_EQ(a.max_rank(1), 0);
}

TEST(ReductionMessage, ADifferentLayoutOfTheSameSizeIsReportedNotMixed) {
  ReductionMessage a, b;  // 3 sums against 1 sum and one min-max pair: 24 bytes of fields each
  a.add_sum(1.0);
  a.add_sum(2.0);
  a.add_sum(3.0);
  b.add_sum(1.0);
  b.add_min_max(9);
  ASSERT_EQ(a.encode().size(), b.encode().size());
  reduce_into(a, b);
  EXPECT_FALSE(a.layout_agreed());
  EXPECT_DOUBLE_EQ(a.sum(1), 2.0);  // its own values stay
}

TEST(CollectiveTracker, CallSequencesHashEqualOnlyWhenTheyMatch) {
  CollectiveTracker a("test-a"), b("test-b");
  for (auto* t : {&a, &b}) t->end(t->begin("allreduce", 8, std::string("metrics")));
  EXPECT_EQ(a.hash(), b.hash());
  a.end(a.begin("allreduce", 8, std::string("bucket 0")));
  b.end(b.begin("allreduce", 8, std::string("bucket 1")));  // same size, called from elsewhere
  EXPECT_NE(a.hash(), b.hash());
  CollectiveTracker c("test-c"), d("test-d");
  c.end(c.begin("allreduce", 8, std::string("x")));
  d.end(d.begin("allreduce", 16, std::string("x")));
  EXPECT_NE(c.hash(), d.hash());
}

TEST(CollectiveTracker, RingBufferKeepsTheLastCallsInOrder) {
  CollectiveTracker t("test-ring");
  const std::uint64_t total = CollectiveTracker::kHistory + 10;
  for (std::uint64_t i = 1; i <= total; ++i) {
    const auto seq = t.begin("broadcast", i, std::string("call ") + std::to_string(i));
    if (i < total) t.end(seq);  // the last stays open
  }
  const auto s = t.snapshot(/*with_history=*/true);
  ASSERT_EQ(s.history.size(), CollectiveTracker::kHistory);
  EXPECT_EQ(s.history.front().seq, total - CollectiveTracker::kHistory + 1);
  EXPECT_EQ(s.history.back().seq, total);
  EXPECT_TRUE(s.history.back().open);
  EXPECT_FALSE(s.history.front().open);
  EXPECT_STREQ(s.history.back().label, ("call " + std::to_string(total)).c_str());
  EXPECT_EQ(s.history.back().hash, s.hash);
}

TEST(CollectiveTracker, BackgroundChannelsStayOutOfTheLockstepHash) {
  const std::uint64_t before = CollectiveTracker::lockstep_hash();
  CollectiveTracker background("test-background", ChannelPace::Background);
  background.end(background.begin("allreduce", 8));
  EXPECT_EQ(CollectiveTracker::lockstep_hash(), before);
  CollectiveTracker lockstep("test-lockstep");
  EXPECT_NE(CollectiveTracker::lockstep_hash(), before);  // a new channel counts, even before its first call
}

TEST(ConsistencyWords, RankRangesAndGroups) {
  EXPECT_EQ(rank_ranges({0, 1, 2, 3, 5, 7, 8, 9}), "0-3, 5, 7-9");
  EXPECT_EQ(rank_ranges({4}), "4");
  const auto groups = group_ranks({5, 5, 9, 5});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(groups[1], (std::vector<int>{2}));
}

TEST(ConsistencyWords, FirstDifferenceNamesTheCallAndTheRanks) {
  const auto same = history(3, {{1, "a"}, {2, "b"}, {3, "c"}});
  const auto other = history(3, {{1, "a"}, {2, "stray"}, {3, "c"}});
  const std::string text = first_difference("mpi", {same, other, same});
  EXPECT_NE(text.find("#2 on the mpi channel"), std::string::npos) << text;
  EXPECT_NE(text.find("ranks 0, 2 called allreduce (8 B, b)"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 called allreduce (8 B, stray)"), std::string::npos) << text;
  EXPECT_EQ(first_difference("mpi", {same, same}), "");
}

TEST(ConsistencyWords, FirstDifferenceOfARankThatMadeFewerCalls) {
  const auto three = history(3, {{1, "a"}, {2, "b"}, {3, "c"}});
  const auto two = history(2, {{1, "a"}, {2, "b"}});
  const std::string text = first_difference("nccl", {three, two});
  EXPECT_NE(text.find("rank 1 made no call #3 (made 2)"), std::string::npos) << text;
}

TEST(ConsistencyWords, ADifferenceOlderThanTheHistorySaysSo) {
  const auto a = history(12, {{10, "x"}, {11, "y"}, {12, "z"}});
  const auto b = history(12, {{10, "q"}, {11, "y"}, {12, "z"}});
  const std::string text = first_difference("mpi", {a, b});
  EXPECT_NE(text.find("already differ at #10, the oldest"), std::string::npos) << text;
}
