// Straggler blame's arithmetic without MPI: the threshold, and how interval findings add up to the
// run's verdict (a rank is named only when it was the straggler in at least half of the intervals).
#include <gtest/gtest.h>

#include "mnddp/diagnose/straggler_watch.hpp"

using namespace mnddp;

namespace {

IntervalStraggler late(int rank, double seconds, bool split = false) {
  IntervalStraggler s;
  s.rank = rank;
  s.late_s = seconds;
  s.split_known = split;
  if (split) {
    s.before_batch_s = seconds - 0.002;
    s.forward_s = 0.001;
    s.backward_s = 0.001;
  }
  return s;
}

}  // namespace

TEST(Straggler, ThresholdIsTwoMillisecondsOrAFifthOfAStep) {
  EXPECT_DOUBLE_EQ(straggler_threshold(0.002), 2e-3);
  EXPECT_DOUBLE_EQ(straggler_threshold(0.5), 0.1);
}

TEST(Straggler, ARankLateInHalfTheIntervalsIsNamedWithItsMeanSplit) {
  StragglerTally tally;
  tally.add(late(2, 0.5));  // found first: its split follows an interval later
  tally.add(late(2, 0.7, true));
  tally.add(late(2, 0.3, true));
  tally.add(IntervalStraggler{});  // an interval without a straggler
  tally.add(late(0, 0.1));
  tally.add(IntervalStraggler{});
  const StragglerVerdict v = tally.verdict({"a", "b", "c"});
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.host, "c");
  EXPECT_EQ(v.late_intervals, 3);
  EXPECT_EQ(v.intervals, 6);
  EXPECT_NEAR(v.late_s, 0.5, 1e-12);
  ASSERT_TRUE(v.split_known);
  EXPECT_NEAR(v.before_batch_s, 0.498, 1e-12);  // the mean over the two intervals with a split
}

TEST(Straggler, NoRankIsNamedWithoutAConsistentOne) {
  StragglerTally tally;
  for (int i = 0; i < 4; ++i) tally.add(late(i % 2 == 0 ? 0 : 1, 0.01));
  tally.add(IntervalStraggler{});
  tally.add(IntervalStraggler{});
  EXPECT_EQ(tally.verdict({"a", "b"}).rank, -1);  // 2 of 6 each
  StragglerTally clean;
  for (int i = 0; i < 5; ++i) clean.add(IntervalStraggler{});
  EXPECT_EQ(clean.verdict({"a", "b"}).rank, -1);
  EXPECT_EQ(clean.verdict({"a", "b"}).intervals, 5);
}
