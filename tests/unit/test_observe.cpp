// The observers' torch-free parts: the timeline records only while on and hands its events over
// once; the progress line says where the run is and fits its width; merging per-rank traces keeps
// every event, gives each rank its track, and keeps what a killed rank's file holds; TensorBoard's
// record checksum is CRC-32C, masked.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "mnddp/error.hpp"
#include "mnddp/observe/progress_bar.hpp"
#include "mnddp/observe/tensorboard.hpp"
#include "mnddp/observe/timeline.hpp"
#include "mnddp/observe/trace_merge.hpp"
#include "mnddp/observe/trace_observer.hpp"

using namespace mnddp;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(Timeline, RecordsOnlyWhileOnAndDrainsOnce) {
  timeline::drain();
  timeline::span("step", "while off", timeline::Clock::now(), timeline::Clock::now());
  EXPECT_TRUE(timeline::drain().empty()) << "a disabled timeline records nothing";
  timeline::enable(true);
  { const timeline::ScopedSpan span("step", "scoped"); }
  std::thread([] {
    timeline::name_this_thread("worker");
    timeline::async_span("comm", "in flight", timeline::Clock::now(), timeline::Clock::now() + 1ms);
  }).join();
  timeline::enable(false);
  const auto events = timeline::drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "scoped");
  EXPECT_EQ(events[0].kind, timeline::Event::Kind::Span);
  EXPECT_LE(events[0].begin, events[0].end);
  EXPECT_EQ(events[1].kind, timeline::Event::Kind::Async);
  EXPECT_NE(events[1].id, 0u);
  EXPECT_NE(events[0].thread, events[1].thread) << "each thread has its own track";
  EXPECT_EQ(timeline::thread_names()[static_cast<std::size_t>(events[1].thread)], "worker");
  EXPECT_TRUE(timeline::drain().empty()) << "events are handed over once";
}

TEST(Timeline, ThreadsOfOneSeriesShareATrack) {
  int first = -1;
  int second = -1;
  timeline::enable(true);
  for (int* index : {&first, &second}) {
    std::thread([index] {
      timeline::name_this_thread("checkpoint writer", /*shared=*/true);
      timeline::span("checkpoint", "commit", timeline::Clock::now(), timeline::Clock::now());
      *index = timeline::drain().back().thread;
    }).join();
  }
  timeline::enable(false);
  EXPECT_EQ(first, second);
}

TEST(ProgressBar, SaysWhereTheRunIsAndFitsItsWidth) {
  ProgressBar bar(100);
  const auto start = RunObserver::Clock::now();
  bar.run_started({/*first_step=*/0, /*total_steps=*/200, /*steps_per_epoch=*/50, /*samples_per_step=*/64, 2});
  bar.step_finished(50, 1, start, start + 1s);
  StepMetrics m;
  m.step = 50;
  m.loss = 0.4321;
  m.samples_per_second = 1234;
  m.step_time_s = 0.010;
  m.data_wait_s = 0.0025;
  bar.interval(m);
  const std::string line = bar.render(RunObserver::Clock::now() + 10s);
  EXPECT_NE(line.find("step 50/200 epoch 1"), std::string::npos) << line;
  EXPECT_NE(line.find(" 25%"), std::string::npos) << line;
  EXPECT_NE(line.find("1234 samples/s"), std::string::npos) << line;
  EXPECT_NE(line.find("loss 0.4321"), std::string::npos) << line;
  EXPECT_NE(line.find("data wait 25%"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0:3"), std::string::npos) << "150 steps left at ~5 steps/s: ~30 s; " << line;
  EXPECT_NE(line.find("[#"), std::string::npos) << line;
  EXPECT_LT(line.size(), 100u);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  bar.validation_started(50);
  EXPECT_NE(bar.render(RunObserver::Clock::now()).find("validating..."), std::string::npos);
  bar.step_finished(51, 1, start, start + 1s);
  EXPECT_EQ(bar.render(RunObserver::Clock::now()).find("validating"), std::string::npos) << "until the next step";
  ProgressBar narrow(40);
  narrow.run_started({0, 200, 50, 64, 2});
  EXPECT_LT(narrow.render(RunObserver::Clock::now()).size(), 40u);
}

namespace {

// A rank's file as trace_observer.cpp writes it: header, one event per line, closing line.
void write_rank(const fs::path& dir, int rank, int events, bool closed) {
  std::ofstream out(dir / fmt::format("rank-{:05}.trace.json", rank));
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":" << rank << "},\"traceEvents\":[\n";
  for (int e = 0; e < events; ++e)
    out << (e ? ",\n" : "") << "{\"ph\":\"X\",\"name\":\"step " << e << "\",\"pid\":" << rank
        << ",\"tid\":0,\"ts\":" << e * 10 << ",\"dur\":5}";
  if (closed)
    out << "\n]}\n";
  else
    out << ",\n{\"ph\":\"X\",\"name\":\"cut sh";  // killed mid-write
}

}  // namespace

TEST(TraceMerge, JoinsRanksIntoOneFileAndKeepsAKilledRanksCompleteEvents) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("mnddp-trace-merge-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_rank(dir, 0, 5, true);
  write_rank(dir, 1, 3, false);
  std::ofstream(dir / "rank-00002.trace.json").flush();  // killed before its header: empty
  const TraceMergeResult merged = merge_traces(dir.string());
  EXPECT_EQ(merged.ranks, 3);
  EXPECT_EQ(merged.events, 8u);
  EXPECT_EQ(merged.skipped_lines, 1u) << "rank 1's last line, cut short";
  ASSERT_EQ(merged.repaired.size(), 2u);
  EXPECT_NE(merged.repaired[0].find("rank-00001"), std::string::npos);
  EXPECT_NE(merged.repaired[1].find("rank-00002"), std::string::npos);
  const auto json = nlohmann::json::parse(std::ifstream(merged.output));
  std::set<int> pids;
  for (const auto& e : json["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(json["traceEvents"].size(), 8u);
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(trace_file_rank("rank-00003.trace.json"), 3);
  EXPECT_EQ(trace_file_rank("merged.trace.json"), std::nullopt);
  EXPECT_EQ(trace_file_rank("rank-x.trace.json"), std::nullopt);
  // Merging again reads only rank files (not its own output).
  EXPECT_EQ(merge_traces(dir.string()).events, 8u);
  fs::remove_all(dir);
  EXPECT_THROW(merge_traces(dir.string()), UsageError);
}

TEST(TensorBoard, RecordsCarryTfRecordsMaskedCrc32c) {
  // CRC-32C's check value (RFC 3720): "123456789" -> 0xE3069283; TFRecord masks it.
  const std::uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}
