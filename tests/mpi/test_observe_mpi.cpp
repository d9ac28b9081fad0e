// The observers that need every rank: the end-of-run summary gathers each rank's step phases and
// names the rank that spent the most on each (a rank made slow in one phase is the one named), with
// the final and best validation metric; the trace observer writes one valid Chrome-trace file per
// rank, with the loop's spans and each collective from issue to completion, merged into a track
// per rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/observe/run_summary.hpp"
#include "mnddp/observe/trace_merge.hpp"
#include "mnddp/observe/trace_observer.hpp"
#include "test_support.hpp"

using namespace mnddp;
using namespace std::chrono_literals;
using Clock = RunObserver::Clock;

namespace {

// The line of `text` that starts (after its indent) with `start`.
std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(' ') != std::string::npos && line.substr(line.find_first_not_of(' ')).starts_with(start))
      return line;
  return {};
}

}  // namespace

TEST(RunSummary, NamesTheRankThatSpentTheMostOnEachPhase) {
  MpiComm comm;
  const int n = comm.size();
  const int slow = n - 1;  // waits 5 ms for data where the others wait 1 ms
  std::optional<testing_support::TempDir> temp;
  if (comm.is_root()) temp.emplace("mnddp-summary");
  const std::string metrics = temp ? temp->file("metrics.jsonl") : std::string();
  RunSummary summary(comm, {metrics, "ck", "", "", ""}, fmt::format("host{}", comm.rank()));
  summary.run_started({0, 10, 10, 64, n});
  auto t = Clock::now();
  for (int step = 1; step <= 10; ++step) {
    const auto begin = t;
    auto phase = [&](StepPhase p, std::chrono::microseconds d) {
      summary.phase(p, t, t + d);
      t += d;
    };
    phase(StepPhase::DataWait, comm.rank() == slow ? 5000us : 1000us);
    phase(StepPhase::Forward, 2000us);
    phase(StepPhase::Backward, 4000us);
    phase(StepPhase::ExposedComm, comm.rank() == 0 ? 1500us : 500us);
    phase(StepPhase::Optimizer, 1000us);
    summary.step_finished(step, 0, begin, t);
    if (step == 4 || step == 7 || step == 10) {
      const double accuracy = step == 4 ? 0.5 : step == 7 ? 0.7 : 0.6;
      summary.validated({step, 0, {{"loss", 1.0}, {"accuracy", accuracy}}, 100}, "accuracy", t, t + 10ms);
    }
  }
  summary.run_finished({10, false, false, "ck/step-10.h5", "", {}});
  if (comm.rank() != 0) {
    EXPECT_TRUE(summary.text().empty());
    return;
  }
  const std::string& text = summary.text();
  const double wait_ms = (1.0 * (n - 1) + 5.0) / n;
  const double step_ms = wait_ms + 2 + 4 + (1.5 + 0.5 * (n - 1)) / n + 1;
  EXPECT_NE(line_starting(text, "step time").find(fmt::format("{:.2f} ms per step, mean over {} ranks", step_ms, n)),
            std::string::npos)
      << text;
  const std::string wait = line_starting(text, "data wait");
  EXPECT_NE(wait.find(fmt::format("{:.2f} ms", wait_ms)), std::string::npos) << text;
  EXPECT_NE(wait.find(fmt::format("rank {} (host{})", slow, slow)), std::string::npos) << text;
  EXPECT_NE(wait.find("5.00 ms"), std::string::npos) << text;
  EXPECT_NE(line_starting(text, "exposed comm").find("rank 0 ("), std::string::npos) << text;
  EXPECT_NE(line_starting(text, "validation").find("final accuracy 0.6000 at step 10; best 0.7000 at step 7"),
            std::string::npos)
      << text;
  EXPECT_NE(line_starting(text, "outside steps").find("(3 passes)"), std::string::npos) << text;
  EXPECT_NE(line_starting(text, "steps").find("10 of 10 (10 this run"), std::string::npos) << text;
  EXPECT_NE(line_starting(text, "checkpoints").find("ck/step-10.h5"), std::string::npos) << text;
  EXPECT_NE(line_starting(text, "start-up").find("slowest rank"), std::string::npos) << text;
  // The same figures as one line of the metrics file, for scripts.
  std::ifstream in(metrics);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto record = nlohmann::json::parse(line);
  EXPECT_EQ(record["kind"], "summary");
  EXPECT_EQ(record["step"], 10);
  EXPECT_EQ(record["phases"]["data_wait"]["most_rank"], slow);
  EXPECT_NEAR(record["phases"]["data_wait"]["mean_s"].get<double>(), wait_ms * 1e-3, 1e-9);
  EXPECT_NEAR(record["step_time_s"].get<double>(), step_ms * 1e-3, 1e-9);
  EXPECT_EQ(record["best"]["step"], 7);
  EXPECT_EQ(record["final"]["value"], 0.6);
}

TEST(TraceObserver, OneValidFilePerRankWithTheLoopAndItsCollectivesMergedIntoATrackPerRank) {
  MpiComm comm;
  std::string directory;
  std::optional<testing_support::TempDir> temp;
  if (comm.is_root()) {
    temp.emplace("mnddp-trace");
    directory = temp->path().string();
  }
  broadcast_string(comm, directory);
  {
    TraceObserver trace(comm, directory, "testhost");
    trace.run_started({0, 2, 2, 8, comm.size()});
    for (int step = 1; step <= 2; ++step) {
      const auto begin = Clock::now();
      trace.phase(StepPhase::Forward, begin, Clock::now());
      float value = 1.0f;
      {
        const CollectiveLabel label(fmt::format("gradient bucket {}", step));
        comm.allreduce_async(&value, 1, DType::F32, ReduceOp::Sum)->wait();
      }
      EXPECT_EQ(value, static_cast<float>(comm.size()));
      trace.step_finished(step, 0, begin, Clock::now());
    }
    StepMetrics m;
    m.loss = 0.5;
    trace.interval(m);
    trace.run_finished({2, false, false, "", "", {}});
  }
  std::ifstream in(trace_file_path(directory, comm.rank()));
  const auto trace = nlohmann::json::parse(in);  // valid JSON, closed
  std::set<std::string> spans;
  std::set<std::string> async_begun;
  std::set<std::string> async_ended;
  std::set<std::string> threads;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], comm.rank());
    const std::string ph = e["ph"];
    if (ph == "X") spans.insert(e["name"].get<std::string>());
    if (ph == "b") async_begun.insert(e["name"].get<std::string>());
    if (ph == "e") async_ended.insert(e["name"].get<std::string>());
    if (ph == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_TRUE(spans.contains("forward"));
  EXPECT_TRUE(spans.contains("step 2"));
  EXPECT_TRUE(spans.contains("gradient bucket 1 (running)")) << "the channel thread's execution";
  EXPECT_TRUE(async_begun.contains("gradient bucket 2")) << "issued";
  EXPECT_EQ(async_begun, async_ended) << "and completed";
  EXPECT_TRUE(threads.contains("training"));
  EXPECT_TRUE(threads.contains("mpi-async channel"));
  comm.barrier();
  if (comm.is_root()) {
    const TraceMergeResult merged = merge_traces(directory);
    EXPECT_EQ(merged.ranks, comm.size());
    EXPECT_TRUE(merged.repaired.empty());
    std::set<int> pids;
    const auto json = nlohmann::json::parse(std::ifstream(merged.output));
    for (const auto& e : json["traceEvents"]) pids.insert(e["pid"].get<int>());
    EXPECT_EQ(static_cast<int>(pids.size()), comm.size());
  }
  comm.barrier();  // rank 0's directory outlives the others' reads
}
