// --deadline: durations in every form Slurm and people write them, Slurm's time stamps, where the
// job's end is read from (squeue, then scontrol, then the environment; a fake runner stands in for
// the commands), and the schedule's decision once the end is near.
#include <gtest/gtest.h>

#include <random>

#include "mnddp/ckpt/checkpoint_schedule.hpp"
#include "mnddp/error.hpp"
#include "mnddp/job_deadline.hpp"

using namespace mnddp;

TEST(JobDeadline, DurationsInEveryForm) {
  EXPECT_EQ(parse_duration("3600"), 3600.0);
  EXPECT_EQ(parse_duration("90s"), 90.0);
  EXPECT_EQ(parse_duration("45m"), 2700.0);
  EXPECT_EQ(parse_duration("2h"), 7200.0);
  EXPECT_EQ(parse_duration("1h30m"), 5400.0);
  EXPECT_EQ(parse_duration("1h30m15s"), 5415.0);
  EXPECT_EQ(parse_duration("05:30"), 330.0);
  EXPECT_EQ(parse_duration("01:00:10"), 3610.0);
  EXPECT_EQ(parse_duration("2-00:30:00"), 2 * 86400.0 + 1800.0);
  EXPECT_EQ(parse_duration("1-12"), 86400.0 + 12 * 3600.0);
  EXPECT_FALSE(parse_duration("1h30"));  // minutes or seconds?
  EXPECT_FALSE(parse_duration("soon"));
  EXPECT_FALSE(parse_duration(""));
}

TEST(JobDeadline, OptionValues) {
  EXPECT_EQ(parse_deadline("auto").mode, DeadlineRequest::Mode::Auto);
  EXPECT_EQ(parse_deadline("none").mode, DeadlineRequest::Mode::None);
  EXPECT_EQ(parse_deadline("45m").seconds, 2700.0);
  EXPECT_EQ(format_deadline(parse_deadline("45m")), "2700s");
  EXPECT_THROW(parse_deadline("0"), UsageError);
  try {
    parse_deadline("tomorrow");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--deadline: 'tomorrow'"), std::string::npos);
  }
}

// Every value the option accepts reads back as itself after the configuration's round trip (rank 0
// formats, every rank parses): 14 days printed as "1.2096e+06s" was refused on the way back.
TEST(JobDeadline, EveryDeadlineRoundTripsExactly) {
  for (const char* text : {"14-00:00:00", "1000000", "999999", "1.5", "3650-00:00:00", "1h0m0.25s", "86399.999"}) {
    const DeadlineRequest request = parse_deadline(text);
    const DeadlineRequest back = parse_deadline(format_deadline(request));
    EXPECT_EQ(back.seconds, request.seconds) << text << " -> " << format_deadline(request);
  }
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> seconds(1.0, 10 * 365.0 * 86400.0);
  for (int i = 0; i < 10000; ++i) {
    const DeadlineRequest request{DeadlineRequest::Mode::After, seconds(random)};
    EXPECT_EQ(parse_deadline(format_deadline(request)).seconds, request.seconds) << format_deadline(request);
  }
  EXPECT_THROW(parse_deadline("0.5"), UsageError);            // below a second
  EXPECT_THROW(parse_deadline("4000-00:00:00"), UsageError);  // past ten years
}

// A long value is refused with a message, not scanned into a stack overflow (std::regex recursed on
// the length of its input) or an out_of_range from stod.
TEST(JobDeadline, LongValuesAreRefusedNotCrashedOn) {
  for (const std::size_t length : {65u, 20000u, 200000u, 2000000u}) {
    EXPECT_FALSE(parse_duration(std::string(length, '1'))) << length;
    try {
      parse_deadline(std::string(length, '1'));
      FAIL() << length;
    } catch (const UsageError& e) {
      EXPECT_LT(std::string(e.what()).size(), 300u);
    }
  }
  EXPECT_FALSE(parse_slurm_time(std::string(200000, '2')));
}

TEST(JobDeadline, SlurmTimeStamps) {
  const auto t = parse_slurm_time("2026-12-02T16:00:00\n");
  ASSERT_TRUE(t);
  const auto later = parse_slurm_time("2026-12-02T16:01:30");
  EXPECT_EQ(*later - *t, 90);
  EXPECT_FALSE(parse_slurm_time("Unknown"));
  EXPECT_FALSE(parse_slurm_time("NONE"));
  EXPECT_FALSE(parse_slurm_time("N/A"));
}

TEST(JobDeadline, SlurmEndFromSqueueThenScontrolThenTheEnvironment) {
  const std::time_t now = *parse_slurm_time("2026-12-02T15:00:00");
  const Environment slurm{{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_END_TIME", std::to_string(now + 600)}};
  std::vector<std::string> asked;
  auto answer = [&](std::string squeue, std::string scontrol) {
    return [&asked, squeue, scontrol](const std::vector<std::string>& argv) {
      std::string command;
      for (const auto& arg : argv) command += (command.empty() ? "" : " ") + arg;
      asked.push_back(command);
      return argv.front() == "squeue" ? squeue : scontrol;
    };
  };
  auto end = find_job_end({}, slurm, answer("2026-12-02T15:30:00\n", ""), now);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->seconds_left, 1800.0);
  EXPECT_EQ(end->source, "squeue");
  EXPECT_EQ(asked.front(), "squeue -h -j 42 -o %e");
  end = find_job_end(
      {}, slurm,
      answer("", "JobId=42 JobName=x\n   StartTime=2026-12-02T14:00:00 EndTime=2026-12-02T15:20:00 Deadline=N/A"), now);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->seconds_left, 1200.0);
  EXPECT_EQ(end->source, "scontrol");
  end = find_job_end({}, slurm, answer("", ""), now);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->seconds_left, 600.0);
  EXPECT_EQ(end->source, "SLURM_JOB_END_TIME");
  // No time limit (squeue says NONE, scontrol Unknown), or not under Slurm: no deadline.
  EXPECT_FALSE(find_job_end({}, {{"SLURM_JOB_ID", "42"}}, answer("NONE\n", "EndTime=Unknown"), now));
  EXPECT_FALSE(find_job_end({}, {}, answer("2026-12-02T15:30:00", ""), now));
  // An end beyond --deadline's 10 years, ahead or behind, is no deadline (Slurm can print a far
  // year for no limit; in nanoseconds such an end would overflow the clock).
  EXPECT_FALSE(find_job_end({}, slurm, answer("9999-12-31T23:59:59", ""), now));
  EXPECT_FALSE(find_job_end({}, slurm, answer("", "EndTime=0000-01-01T00:00:00"), now));
  EXPECT_FALSE(
      find_job_end({}, {{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_END_TIME", "99999999999999"}}, answer("", ""), now));
  // An explicit duration wins; none is none.
  end = find_job_end(parse_deadline("20m"), slurm, answer("2026-12-02T15:30:00", ""), now);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->seconds_left, 1200.0);
  EXPECT_FALSE(find_job_end(parse_deadline("none"), slurm, answer("2026-12-02T15:30:00", ""), now));
}

TEST(JobDeadline, ScheduleSavesAndStopsWhenTheEndIsNear) {
  CheckpointScheduleOptions options;
  options.enabled = true;
  options.interval = 100;
  CheckpointSchedule schedule(options, 0, CheckpointSchedule::Clock::now());
  AgreedFlags near;
  near.deadline = true;
  const CheckpointDecision d = schedule.decide(37, near, false);
  EXPECT_TRUE(d.save);
  EXPECT_TRUE(d.stop);
  EXPECT_TRUE(d.preempted);  // exit code 3: requeue to continue
  EXPECT_TRUE(d.deadline);
  const CheckpointDecision last = schedule.decide(40, near, true);  // the last step: just the final save
  EXPECT_FALSE(last.stop);
  EXPECT_FALSE(last.deadline);
  EXPECT_FALSE(schedule.decide(38, AgreedFlags{}, false).stop);
}
