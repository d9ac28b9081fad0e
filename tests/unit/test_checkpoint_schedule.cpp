// The checkpoint schedule's decisions, without MPI: interval, minutes (a hand-driven clock),
// preemption, --steps-per-run, the final state, and nothing at all without --checkpoint-dir.
#include <gtest/gtest.h>

#include "mnddp/ckpt/checkpoint_schedule.hpp"

using namespace mnddp;
using Clock = CheckpointSchedule::Clock;

namespace {

const Clock::time_point kStart{};  // a fixed origin: the schedule only compares times
constexpr AgreedFlags kQuiet{};
constexpr AgreedFlags kPreempted{true, false};
constexpr AgreedFlags kTimeDue{false, true};

CheckpointScheduleOptions enabled() {
  CheckpointScheduleOptions options;
  options.enabled = true;
  return options;
}

}  // namespace

TEST(CheckpointSchedule, WithoutADirectoryNothingIsEverSavedOrStopped) {
  const CheckpointSchedule schedule({}, 0, kStart);
  EXPECT_FALSE(schedule.enabled());
  for (const auto& flags : {kQuiet, kPreempted, kTimeDue}) {
    const auto decision = schedule.decide(10, flags, false);
    EXPECT_FALSE(decision.save);
    EXPECT_FALSE(decision.stop);
  }
  EXPECT_FALSE(schedule.decide(10, kQuiet, true).save);
  EXPECT_FALSE(schedule.time_due(kStart + std::chrono::hours(100)));
}

TEST(CheckpointSchedule, IntervalSavesEveryNthStepAndNothingElse) {
  auto options = enabled();
  options.interval = 10;
  const CheckpointSchedule schedule(options, 0, kStart);
  for (std::int64_t step = 1; step <= 30; ++step) {
    const auto decision = schedule.decide(step, kQuiet, false);
    EXPECT_EQ(decision.save, step % 10 == 0) << "step " << step;
    EXPECT_FALSE(decision.stop) << "step " << step;
  }
}

TEST(CheckpointSchedule, MinutesCountFromTheLastSave) {
  auto options = enabled();
  options.minutes = 2.0;
  CheckpointSchedule schedule(options, 0, kStart);
  EXPECT_FALSE(schedule.time_due(kStart + std::chrono::seconds(119)));
  EXPECT_TRUE(schedule.time_due(kStart + std::chrono::seconds(120)));
  schedule.saved(7, kStart + std::chrono::seconds(130));
  EXPECT_FALSE(schedule.time_due(kStart + std::chrono::seconds(249)));
  EXPECT_TRUE(schedule.time_due(kStart + std::chrono::seconds(250)));
  // The flag decides once agreed (another rank's clock may be the one that is due).
  EXPECT_TRUE(schedule.decide(8, kTimeDue, false).save);
  EXPECT_FALSE(schedule.decide(8, kTimeDue, false).stop);
  EXPECT_FALSE(schedule.decide(8, kQuiet, false).save);
}

TEST(CheckpointSchedule, PreemptionSavesAndStops) {
  const CheckpointSchedule schedule(enabled(), 0, kStart);
  const auto decision = schedule.decide(3, kPreempted, false);
  EXPECT_TRUE(decision.save);
  EXPECT_TRUE(decision.stop);
  EXPECT_TRUE(decision.preempted);
}

TEST(CheckpointSchedule, StepsPerRunCountFromTheResumedStep) {
  auto options = enabled();
  options.steps_per_run = 5;
  const CheckpointSchedule schedule(options, 20, kStart);
  EXPECT_EQ(schedule.last_saved_step(), 20);
  EXPECT_FALSE(schedule.decide(24, kQuiet, false).save);
  const auto decision = schedule.decide(25, kQuiet, false);
  EXPECT_TRUE(decision.save);
  EXPECT_TRUE(decision.stop);
  EXPECT_FALSE(decision.preempted);
}

TEST(CheckpointSchedule, TheFinalStateIsKeptOnceAndNeverStops) {
  auto options = enabled();
  options.interval = 10;
  CheckpointSchedule schedule(options, 0, kStart);
  auto decision = schedule.decide(17, kQuiet, true);
  EXPECT_TRUE(decision.save);
  EXPECT_FALSE(decision.stop);
  // Saved by the interval at this very step: not written twice.
  schedule.saved(20, kStart);
  EXPECT_FALSE(schedule.decide(20, kQuiet, true).save);
  // The end of training with --steps-per-run spent is the end, not an early stop.
  options.steps_per_run = 20;
  const CheckpointSchedule budget(options, 0, kStart);
  decision = budget.decide(20, kQuiet, true);
  EXPECT_TRUE(decision.save);
  EXPECT_FALSE(decision.stop);
}

TEST(CheckpointSchedule, AResumedRunDoesNotSaveItsStartingStepAgain) {
  const CheckpointSchedule schedule(enabled(), 40, kStart);
  EXPECT_FALSE(schedule.decide(40, kQuiet, true).save);
}

TEST(CheckpointSchedule, NodeLocalCheckpointsEveryIntervalAndWithEveryFileSystemOne) {
  auto options = enabled();
  options.interval = 30;
  options.local_interval = 10;
  CheckpointSchedule schedule(options, 0, kStart);
  std::vector<std::int64_t> local, file_system;
  for (std::int64_t step = 1; step <= 60; ++step) {
    const auto decision = schedule.decide(step, kQuiet, false);
    if (decision.save) {
      EXPECT_TRUE(decision.save_local) << step;  // drained from the same snapshot
      file_system.push_back(step);
      schedule.saved(step, kStart);
    } else if (decision.save_local) {
      local.push_back(step);
      schedule.saved(step, kStart, /*local=*/true);
    }
  }
  EXPECT_EQ(local, (std::vector<std::int64_t>{10, 20, 40, 50}));
  EXPECT_EQ(file_system, (std::vector<std::int64_t>{30, 60}));
}

TEST(CheckpointSchedule, ALocalCheckpointDueWhileTheWriterIsBusyWaitsForTheFirstStepAfter) {
  auto options = enabled();
  options.local_interval = 10;
  CheckpointSchedule schedule(options, 0, kStart);
  AgreedFlags busy;
  busy.writer_busy = true;
  EXPECT_FALSE(schedule.decide(10, busy, false).save_local);
  EXPECT_FALSE(schedule.decide(11, busy, false).save_local);
  ASSERT_TRUE(schedule.decide(12, kQuiet, false).save_local);
  schedule.saved(12, kStart, /*local=*/true);
  EXPECT_EQ(schedule.last_local_step(), 12);
  EXPECT_EQ(schedule.last_saved_step(), 0);  // a local checkpoint is not a file-system one
  EXPECT_FALSE(schedule.decide(21, kQuiet, false).save_local);
  EXPECT_TRUE(schedule.decide(22, kQuiet, false).save_local);  // counted from 12
  // Without a local level nothing is local.
  const CheckpointSchedule plain(enabled(), 0, kStart);
  EXPECT_FALSE(plain.decide(10, kQuiet, false).save_local);
}
