// The pre-flight link test's judgement on made-up samples: a node whose every link is slow is blamed
// and excluded; a single slow link blames no node; links are compared with their own kind (within a
// node, across nodes); a clean set passes. Slow links are measured again: a passing stall is
// forgiven, a slow node is blamed on both passes.
#include <gtest/gtest.h>

#include "mnddp/diagnose/link_test.hpp"

namespace mnddp {
namespace {

constexpr std::size_t kBytes = 1u << 30;  // 1 GiB: seconds s give 1.07/s GB/s

// XOR pairs of 4 ranks (k = 1, 2, 3: every pair), each measured by both ends, with `seconds(a, b)`.
template <typename F>
std::vector<LinkSample> all_pairs(F seconds) {
  std::vector<LinkSample> samples;
  for (int k = 1; k < 4; ++k)
    for (int r = 0; r < 4; ++r) samples.push_back({r, r ^ k, false, seconds(std::min(r, r ^ k), std::max(r, r ^ k))});
  return samples;
}

const std::vector<std::string> kHosts = {"n1", "n1", "n2", "n2"};

TEST(LinkTest, ANodeWhoseLinksAreAllSlowIsExcluded) {
  // Within a node 0.1 s, across 0.4 s; everything touching rank 3 ten times slower.
  const auto samples = all_pairs([](int a, int b) {
    const double base = kHosts[a] == kHosts[b] ? 0.1 : 0.4;
    return b == 3 ? 10 * base : base;
  });
  const auto j = judge_links(samples, kHosts, kBytes, 0.5);
  EXPECT_EQ(j.blamed_ranks, std::vector<int>{3});
  EXPECT_EQ(j.exclude, std::vector<std::string>{"n2"});
  EXPECT_EQ(j.slow.size(), 3u);
}

TEST(LinkTest, OneSlowLinkBlamesNoNode) {
  const auto samples = all_pairs([](int a, int b) {
    const double base = kHosts[a] == kHosts[b] ? 0.1 : 0.4;
    return a == 0 && b == 2 ? 10 * base : base;
  });
  const auto j = judge_links(samples, kHosts, kBytes, 0.5);
  ASSERT_EQ(j.slow.size(), 1u);
  EXPECT_EQ(j.slow[0].a, 0);
  EXPECT_EQ(j.slow[0].b, 2);
  EXPECT_TRUE(j.blamed_ranks.empty());
  EXPECT_TRUE(j.exclude.empty());
}

TEST(LinkTest, LinksAreComparedWithTheirOwnKind) {
  // Across nodes four times slower than within: normal, nothing is slow.
  const auto samples = all_pairs([](int a, int b) { return kHosts[a] == kHosts[b] ? 0.1 : 0.4; });
  const auto j = judge_links(samples, kHosts, kBytes, 0.5);
  EXPECT_TRUE(j.slow.empty());
  EXPECT_NEAR(j.pair_median_same_host, 10.737, 0.01);
  EXPECT_NEAR(j.pair_median_cross_host, 2.684, 0.01);
}

TEST(LinkTest, APairTakesTheSlowerOfItsTwoEnds) {
  auto samples = all_pairs([](int, int) { return 0.1; });
  for (auto& s : samples)
    if (s.from == 1 && s.to == 0) s.seconds = 5.0;  // rank 1 waited long for rank 0 in their round
  const auto j = judge_links(samples, {"a", "a", "a", "a"}, kBytes, 0.5);
  ASSERT_EQ(j.slow.size(), 1u);
  EXPECT_EQ(j.slow[0].a, 0);
  EXPECT_EQ(j.slow[0].b, 1);
}

TEST(LinkTest, TheRingIsReportedNotJudged) {
  std::vector<LinkSample> samples = {{0, 1, true, 0.1}, {1, 2, true, 0.2}, {2, 3, true, 1.0}, {3, 0, true, 0.1}};
  const auto j = judge_links(samples, kHosts, kBytes, 0.5);
  EXPECT_EQ(j.ring_min_rank, 2);
  EXPECT_NEAR(j.ring_min_gbps, 1.074, 0.01);
  EXPECT_TRUE(j.slow.empty());
}

// One slow link in the first pass only (a stall while the node was loaded): the second pass clears
// it. A node slow on both passes is still blamed. A clean first pass is not measured again.
TEST(LinkTest, ASlowLinkIsMeasuredAgainAndAPassingStallIsForgiven) {
  const auto base = [](int a, int b) { return kHosts[a] == kHosts[b] ? 0.1 : 0.4; };
  int calls = 0;
  const auto stall_once = [&] {
    const bool first = calls++ == 0;
    return all_pairs([&](int a, int b) { return first && a == 0 && b == 1 ? 20 * base(a, b) : base(a, b); });
  };
  const auto forgiven = judge_links_twice(stall_once, kHosts, kBytes, 0.2);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(forgiven.slow.empty());
  EXPECT_EQ(forgiven.passes, 2);

  calls = 0;
  const auto slow_node = [&] {
    ++calls;
    return all_pairs([&](int a, int b) { return b == 3 ? 10 * base(a, b) : base(a, b); });
  };
  const auto blamed = judge_links_twice(slow_node, kHosts, kBytes, 0.2);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(blamed.blamed_ranks, std::vector<int>{3});
  EXPECT_EQ(blamed.exclude, std::vector<std::string>{"n2"});

  calls = 0;
  const auto clean = [&] {
    ++calls;
    return all_pairs(base);
  };
  EXPECT_TRUE(judge_links_twice(clean, kHosts, kBytes, 0.2).slow.empty());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace mnddp
