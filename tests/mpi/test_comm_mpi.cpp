// MpiComm on 2 and 3 ranks: values a person can check by hand (the sum of ranks is n(n-1)/2),
// half-precision reductions, the string helpers and the collective failure agreement.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/diagnose/consistency_check.hpp"
#include "mnddp/diagnose/straggler_watch.hpp"
#include "mnddp/error.hpp"

using namespace mnddp;

namespace {

std::uint16_t to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>(bits >> 16);  // exact for the small integers used here
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

class MpiCommTest : public ::testing::Test {
 protected:
  MpiComm comm;
  int n = comm.size();
  int r = comm.rank();
};

TEST_F(MpiCommTest, SumOfRanks) {
  const double expected = n * (n - 1) / 2.0;
  std::vector<float> f(1000, static_cast<float>(r));
  comm.allreduce(f.data(), f.size(), DType::F32, ReduceOp::Sum);
  for (float v : f) ASSERT_EQ(v, expected);
  double d = r;
  comm.allreduce(&d, 1, DType::F64, ReduceOp::Sum);
  EXPECT_EQ(d, expected);
  EXPECT_EQ(allreduce_sum(comm, std::int64_t{r}), n * (n - 1) / 2);
}

TEST_F(MpiCommTest, AverageMaxMin) {
  std::vector<double> v = {static_cast<double>(r), 1.0};
  comm.allreduce(v.data(), v.size(), DType::F64, ReduceOp::Avg);
  EXPECT_DOUBLE_EQ(v[0], (n - 1) / 2.0);
  EXPECT_DOUBLE_EQ(v[1], 1.0);
  EXPECT_EQ(allreduce_max(comm, std::int64_t{r}), n - 1);
  EXPECT_EQ(allreduce_min(comm, std::int64_t{r + 5}), 5);
}

TEST_F(MpiCommTest, HalfPrecisionSumAndAverage) {
  std::vector<_Float16> h(64, static_cast<_Float16>(r + 1));
  comm.allreduce(h.data(), h.size(), DType::F16, ReduceOp::Sum);
  for (auto v : h) ASSERT_EQ(static_cast<float>(v), n * (n + 1) / 2.0f);

  std::vector<std::uint16_t> b(64, to_bf16(static_cast<float>(2 * (r + 1))));
  comm.allreduce(b.data(), b.size(), DType::BF16, ReduceOp::Avg);
  for (auto v : b) ASSERT_EQ(from_bf16(v), static_cast<float>(n + 1));

  std::vector<std::uint16_t> m(3, to_bf16(static_cast<float>(r)));
  comm.allreduce(m.data(), m.size(), DType::BF16, ReduceOp::Max);
  EXPECT_EQ(from_bf16(m[0]), static_cast<float>(n - 1));
}

TEST_F(MpiCommTest, AverageOfIntegersIsRejected) {
  std::int64_t x = r;
  EXPECT_THROW(comm.allreduce(&x, 1, DType::I64, ReduceOp::Avg), std::invalid_argument);
}

TEST_F(MpiCommTest, BroadcastFromLastRank) {
  std::vector<std::int32_t> v(10, r);
  comm.broadcast(v.data(), v.size(), DType::I32, n - 1);
  for (auto x : v) ASSERT_EQ(x, n - 1);
}

TEST_F(MpiCommTest, Allgather) {
  std::int64_t mine = 10 * r;
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  comm.allgather(&mine, all.data(), 1, DType::I64);
  for (int i = 0; i < n; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], 10 * i);
}

TEST_F(MpiCommTest, AllgatherInPlace) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(3 * n), -1);
  for (int i = 0; i < 3; ++i) all[static_cast<std::size_t>(3 * r + i)] = 100 * r + i;
  comm.allgather(all.data() + 3 * r, all.data(), 3, DType::I32);
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(all[static_cast<std::size_t>(3 * q + i)], 100 * q + i);
}

// Rank q puts q + c into every element of chunk c: chunk r then sums to n(n-1)/2 + n r on rank r,
// and lands in rank r's own chunk (where NCCL's in-place reduce-scatter puts it).
TEST_F(MpiCommTest, ReduceScatterLeavesEachRankItsOwnChunk) {
  const std::size_t chunk = 5;
  std::vector<float> buffer(chunk * static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c)
    for (std::size_t i = 0; i < chunk; ++i) buffer[static_cast<std::size_t>(c) * chunk + i] = static_cast<float>(r + c);
  comm.reduce_scatter_async(buffer.data(), chunk, DType::F32, ReduceOp::Sum)->wait();
  for (std::size_t i = 0; i < chunk; ++i)
    EXPECT_EQ(buffer[static_cast<std::size_t>(r) * chunk + i], n * (n - 1) / 2.0f + static_cast<float>(n * r));

  std::vector<std::uint16_t> half(chunk * static_cast<std::size_t>(n), to_bf16(static_cast<float>(2 * (r + 1))));
  comm.reduce_scatter_async(half.data(), chunk, DType::BF16, ReduceOp::Avg)->wait();
  EXPECT_EQ(from_bf16(half[static_cast<std::size_t>(r) * chunk]), static_cast<float>(n + 1));
}

TEST_F(MpiCommTest, StringHelpers) {
  std::string text = r == 0 ? "from rank zero" : "";
  broadcast_string(comm, text, 0);
  EXPECT_EQ(text, "from rank zero");
  const auto all = allgather_strings(comm, std::string(static_cast<std::size_t>(r), 'x'));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(all[static_cast<std::size_t>(i)], std::string(static_cast<std::size_t>(i), 'x'));
}

TEST_F(MpiCommTest, CollectiveCount) {
  const auto before = comm.collective_count();
  comm.barrier();
  double x = 1;
  comm.allreduce(&x, 1, DType::F64, ReduceOp::Sum);
  EXPECT_EQ(comm.collective_count(), before + 2);
}

TEST_F(MpiCommTest, AgreementWithoutFailurePasses) { EXPECT_NO_THROW(agree_on_failure(comm, std::nullopt)); }

TEST_F(MpiCommTest, FailureOnOneRankIsRaisedOnEveryRank) {
  std::optional<Failure> mine;
  if (r == n - 1) mine = Failure{"rank-specific trouble", kExitUsage};
  try {
    agree_on_failure(comm, mine);
    FAIL() << "expected every rank to throw";
  } catch (const Error& e) {
    EXPECT_TRUE(e.collective());
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_STREQ(e.what(), "rank-specific trouble");
  }
}

TEST_F(MpiCommTest, LowestFailingRankWins) {
  std::optional<Failure> mine = Failure{"failed on rank " + std::to_string(r), kExitFailure};
  try {
    agree_on_failure(comm, mine);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "failed on rank 0");
  }
}

TEST_F(MpiCommTest, RootWorkFailureReachesAll) {
  try {
    on_root_then_agree(comm, [] { throw UsageError("root could not read the file"); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(e.collective());
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

// The watchdog's view: every collective is numbered per channel, labelled, and closed when done.
TEST_F(MpiCommTest, CollectivesAreTrackedWithLabels) {
  std::int64_t value = r;
  {
    const CollectiveLabel label("unit test");
    comm.allreduce(&value, 1, DType::I64, ReduceOp::Sum);
  }
  bool found = false;
  for (const auto& s : CollectiveTracker::snapshot_all()) {
    if (s.channel != "mpi" || !s.last || s.last->label != "unit test") continue;
    found = true;
    EXPECT_EQ(s.started, s.finished);
    EXPECT_FALSE(s.oldest_open.has_value());
    EXPECT_EQ(s.last->op, "allreduce");
    EXPECT_EQ(s.last->bytes, 8u);
  }
  EXPECT_TRUE(found);
  auto work = comm.allreduce_async(&value, 1, DType::I64, ReduceOp::Sum);
  work->wait();
  for (const auto& s : CollectiveTracker::snapshot_all()) {
    if (s.channel == "mpi-async") {
      EXPECT_EQ(s.started, s.finished);
    }
  }
}

// --debug-collectives: a rank that calls a different collective is named on every rank, and no rank
// enters the mismatched MPI call (which would truncate or hang).
TEST_F(MpiCommTest, DesyncCheckNamesTheFirstDifferingCall) {
  set_debug_collectives(true);
  std::vector<float> data(4, 1.0f);
  const std::size_t count = r == n - 1 ? 3 : 4;
  try {
    const CollectiveLabel label("step metrics");
    comm.allreduce(data.data(), count, DType::F32, ReduceOp::Sum);
    ADD_FAILURE() << "the mismatch went unnoticed";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_TRUE(e.collective());
    EXPECT_NE(text.find("rank 0 calls allreduce float32 x 4 (step metrics)"), std::string::npos) << text;
    EXPECT_NE(text.find(fmt::format("rank {} calls allreduce float32 x 3", n - 1)), std::string::npos) << text;
  }
  // In step again: the check passes and the call goes through.
  std::vector<float> ones(4, 1.0f);
  comm.allreduce(ones.data(), ones.size(), DType::F32, ReduceOp::Sum);
  set_debug_collectives(false);
  EXPECT_FLOAT_EQ(ones[0], static_cast<float>(n));
}

// Several reductions in one all-reduce: sums, min and max, and the max with its rank.
TEST_F(MpiCommTest, ReductionMessageReducesEveryFieldInOneCall) {
  ReductionMessage m;
  const auto sum = m.add_sum(static_cast<double>(r) + 0.5);
  const auto word = m.add_min_max(100 + static_cast<std::uint64_t>(r) * 7);
  const auto late = m.add_max_rank(r == 1 ? 9.0 : 1.0, r);
  const auto before = comm.collective_count();
  comm.allreduce(m);
  EXPECT_EQ(comm.collective_count(), before + 1);
  ASSERT_TRUE(m.layout_agreed());
  EXPECT_DOUBLE_EQ(m.sum(sum), n * (n - 1) / 2.0 + 0.5 * n);
  EXPECT_EQ(m.min(word), 100u);
  EXPECT_EQ(m.max(word), 100u + 7u * static_cast<std::uint64_t>(n - 1));
  EXPECT_EQ(m.max_rank(late), 1);
  EXPECT_DOUBLE_EQ(m.max_value(late), 9.0);
}

TEST_F(MpiCommTest, ReductionMessageOfAnotherLayoutIsSeenOnEveryRank) {
  ReductionMessage m;
  if (r == n - 1) {
    m.add_sum(1.0);
    m.add_min_max(5);
  } else {
    m.add_sum(1.0);
    m.add_sum(2.0);
    m.add_sum(3.0);
  }
  comm.allreduce(m);
  EXPECT_FALSE(m.layout_agreed());
}

// The always-on check: ranks in step pass; a rank that issued a call the others did not (same size,
// another place in the program) is named on every rank with exit code 4, and so is a replica whose
// parameters differ.
TEST_F(MpiCommTest, ConsistencyCheckPassesInStepAndNamesTheOddRank) {
  ConsistencyCheck check(comm, 1, [] { return 42u; });
  auto interval = [&](std::int64_t step) {
    ReductionMessage m;
    const IntervalPoint at{step, step, false};
    check.contribute(m, at);
    comm.allreduce(m);
    check.receive(m, at);
  };
  interval(1);
  double x = 1.0;
  {
    const CollectiveLabel label(r == n - 1 ? "stray" : "loss");
    comm.allreduce(&x, 1, DType::F64, ReduceOp::Sum);  // the same size everywhere: MPI sees nothing
  }
  try {
    interval(2);
    ADD_FAILURE() << "the differing call went unnoticed";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.exit_code(), kExitDesync);
    EXPECT_TRUE(e.collective());
    EXPECT_NE(text.find(fmt::format("rank {} called allreduce (8 B, stray)", n - 1)), std::string::npos) << text;
    EXPECT_NE(text.find("the previous one, at step 1, agreed"), std::string::npos) << text;
  }
}

// (A test of its own: the fixture's fresh communicator starts the ranks' call hashes equal again.)
TEST_F(MpiCommTest, ConsistencyCheckNamesADriftedReplica) {
  ConsistencyCheck replicas(comm, 1, [&] { return r == 1 ? 7u : 42u; });
  ReductionMessage m;
  const IntervalPoint at{3, 3, true};
  replicas.contribute(m, at);
  comm.allreduce(m);
  try {
    replicas.receive(m, at);
    ADD_FAILURE() << "differing replicas went unnoticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitDesync);
    const std::string text = e.what();
    const std::string odd = n == 2 ? "no majority: rank 0 | rank 1" : "rank 1 differs from the other 2";
    EXPECT_NE(text.find("replicas differ"), std::string::npos) << text;
    EXPECT_NE(text.find(odd), std::string::npos) << text;
  }
}

// Clock offsets between processes of one host are near zero, and known to within the round trip.
TEST_F(MpiCommTest, ClockOffsetsOnOneHostAreSmall) {
  const ClockSync sync = comm.synchronise_clocks();
  EXPECT_LT(std::abs(sync.offset_s), 0.01);
  EXPECT_LT(sync.uncertainty_s, 0.01);
  double base = sync.base_s;
  comm.broadcast(&base, 1, DType::F64, 0);
  EXPECT_EQ(base, sync.base_s);  // the same base everywhere
}

// The last rank reaches its first gradient bucket (its first collective here) 50 ms after the others in every step (its
// batch is ready 48 ms later): it is named in the interval it starts, and with its split the next one.
TEST_F(MpiCommTest, StragglerWatchNamesTheLateRankAndSplitsItsLateness) {
  using Clock = std::chrono::steady_clock;
  const bool slow = r == n - 1;
  Clock::time_point bucket;
  StragglerWatch watch(comm, fmt::format("host{}", r), [&] { return bucket; });
  auto interval = [&](std::int64_t step) {
    comm.barrier();  // the steps start together, as after the previous step's all-reduce
    for (int s = 0; s < 4; ++s) {
      const auto begin = Clock::now();
      const auto ready = begin + std::chrono::milliseconds(slow ? 50 : 2);
      watch.phase(StepPhase::DataWait, begin, ready);
      watch.phase(StepPhase::Forward, ready, ready + std::chrono::milliseconds(1));
      bucket = ready + std::chrono::milliseconds(2);
      watch.step_finished(step - 3 + s, 0, begin, bucket + std::chrono::milliseconds(60));
    }
    ReductionMessage m;
    const IntervalPoint at{step, step - 3, false};
    watch.contribute(m, at);
    comm.allreduce(m);
    watch.receive(m, at);
  };
  interval(4);
  EXPECT_EQ(watch.last_interval().rank, n - 1);
  EXPECT_NEAR(watch.last_interval().late_s, 0.048, 0.005);
  EXPECT_FALSE(watch.last_interval().split_known);
  interval(8);
  ASSERT_TRUE(watch.last_interval().split_known);
  EXPECT_NEAR(watch.last_interval().before_batch_s, 0.048, 0.005);
  EXPECT_NEAR(watch.last_interval().forward_s, 0.0, 0.002);
  EXPECT_NEAR(watch.last_interval().backward_s, 0.0, 0.002);
  const StragglerVerdict v = watch.verdict();
  EXPECT_EQ(v.rank, n - 1);
  EXPECT_EQ(v.host, fmt::format("host{}", n - 1));
  EXPECT_EQ(v.late_intervals, 2);
}
