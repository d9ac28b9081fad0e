// A thread mnddp starts ends the job the way every fatal error does when an exception escapes it:
// one message naming the thread and the exception, exit code 1, not std::terminate's SIGABRT.
#include <gtest/gtest.h>

#include <stdexcept>

#include "mnddp/guarded_thread.hpp"

namespace mnddp {
namespace {

TEST(GuardedThreadDeathTest, AnEscapingExceptionEndsTheJobWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto thread = guarded_thread("data loader", [] { throw std::runtime_error("out of luck"); });
        thread.join();
      },
      testing::ExitedWithCode(kExitFailure),
      "mnddp: fatal: internal error: an exception left the data loader thread: out of luck");
}

TEST(GuardedThread, AReturningBodyEndsNormally) {
  int ran = 0;
  auto thread = guarded_thread("test", [&] { ++ran; });
  thread.join();
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace mnddp
