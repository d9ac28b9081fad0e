// The start-up breakdown: phases follow each other from the start, add up to the total, and stop
// at finish(); the process's start time comes from the kernel and lies before main().
#include <gtest/gtest.h>

#include <thread>

#include "mnddp/observe/startup_breakdown.hpp"

using namespace mnddp;
using namespace std::chrono_literals;

TEST(StartupBreakdown, PhasesFollowEachOtherAndAddUpToTheTotal) {
  StartupBreakdown startup(StartupBreakdown::Clock::now() - 100ms);  // started before it was made
  startup.mark("before");
  std::this_thread::sleep_for(30ms);
  startup.mark("sleep");
  const auto phases = startup.phases();
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].name, "before");
  EXPECT_GE(phases[0].seconds, 0.1) << "the first phase begins at the start";
  EXPECT_GE(phases[1].seconds, 0.03) << "a phase begins where the previous one ended";
  EXPECT_LT(phases[1].seconds, 0.5);
  EXPECT_NEAR(phases[0].seconds + phases[1].seconds, startup.total_seconds(), 1e-9);
}

TEST(StartupBreakdown, FinishEndsStartUpOnce) {
  StartupBreakdown startup(StartupBreakdown::Clock::now());
  startup.mark("config");
  EXPECT_FALSE(startup.finished());
  EXPECT_TRUE(startup.finish("first batch"));
  EXPECT_TRUE(startup.finished());
  EXPECT_FALSE(startup.finish("first batch")) << "reported once";
  startup.mark("later");  // a step's work is not start-up
  ASSERT_EQ(startup.phases().size(), 2u);
  EXPECT_EQ(startup.phases().back().name, "first batch");
  const std::string text = startup.describe();
  EXPECT_NE(text.find("from process start: config "), std::string::npos) << text;
  EXPECT_NE(text.find(", first batch "), std::string::npos) << text;
}

TEST(StartupBreakdown, ProcessStartIsTheKernelsAndPrecedesNow) {
  const auto now = StartupBreakdown::Clock::now();
  const auto start = process_start_time();
  EXPECT_LE(start, now);
  // A test binary starts well within a minute of running its first test; the kernel counts in
  // clock ticks (10 ms), so the start lies at least one tick before "now" only sometimes.
  EXPECT_LT(std::chrono::duration<double>(now - start).count(), 60.0);
}
