// Incident files' parts without a job: the activity board, the stacks of other threads, a record's
// JSON, and the verdict on hand-made records (a rank behind the stuck call, one late to it, one that
// wrote nothing, a crash among requests, an agreed error).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/diagnose/incident_command.hpp"
#include "mnddp/diagnose/incident_schema.hpp"
#include "mnddp/diagnose/thread_stacks.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using json = nlohmann::json;

const Activity::ThreadNow* find_me(const std::vector<Activity::ThreadNow>& threads, const std::string& name) {
  for (const auto& t : threads)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Activity, InnermostScopeAndTheOneAnErrorLeft) {
  Activity::name_thread("activity test");
  {
    const Activity outer("training step 7");
    {
      const Activity inner("forward");
      EXPECT_EQ(find_me(Activity::snapshot(), "activity test")->what, "forward");
    }
    EXPECT_EQ(find_me(Activity::snapshot(), "activity test")->what, "training step 7");
    try {
      const Activity failing("data wait");
      throw std::runtime_error("loader");
    } catch (const std::exception&) {
    }
  }
  const auto threads = Activity::snapshot();  // kept: `me` points into it
  const auto* me = find_me(threads, "activity test");
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->what, "");
  EXPECT_EQ(me->unwound, "data wait");
  const Activity next("training step 8");  // an outermost scope: the handled error is history
  EXPECT_EQ(find_me(Activity::snapshot(), "activity test")->unwound, "");
}

// Not inlined, so that its name is in the stack the capture returns.
[[gnu::noinline]] void wait_in_a_named_function(std::atomic<bool>& stop) {
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  asm volatile("");
}

TEST(ThreadStacks, CapturesAnotherThreadsStack) {
  std::atomic<bool> stop{false};
  std::atomic<long> tid{0};
  std::thread waiter([&] {
    Activity::name_thread("waiter");
    tid = find_me(Activity::snapshot(), "waiter")->tid;
    wait_in_a_named_function(stop);
  });
  while (tid.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto stacks = capture_thread_stacks(std::chrono::milliseconds(500));
  stop = true;
  waiter.join();
  const ThreadStack* found = nullptr;
  for (const auto& s : stacks)
    if (s.tid == tid.load()) found = &s;
  ASSERT_NE(found, nullptr);
  ASSERT_TRUE(found->answered);
  ASSERT_GT(found->frames.size(), 2u);
  // Its frames lie in this test binary (named by the module, whatever dladdr can name).
  bool in_test = false;
  for (const auto& f : found->frames) in_test = in_test || f.module.find("test_incident") != std::string::npos;
  EXPECT_TRUE(in_test);
  EXPECT_EQ(found->frames.front().module.find("test_incident"), std::string::npos)
      << "the innermost frame is the sleep in libc, not the capture handler";
}

TEST(IncidentRecord, HoldsChannelsThreadsAndPeers) {
  RankInfo rank;
  rank.rank = 2;
  rank.world_size = 4;
  rank.host = "nodeB";
  IncidentRecorder::configure(rank, "unused.jsonl", "run-1");
  CollectiveTracker tracker("test-channel");
  tracker.end(tracker.begin("allreduce", 4096, std::string("gradient bucket 0")));
  tracker.begin("allreduce", 4096, std::string("gradient bucket 1"));  // left open
  Activity::set_step(406);
  IncidentReport report;
  report.cause = IncidentCause::Timeout;
  report.reason = "stuck";
  report.stuck = StuckCall{"test-channel", 2, "allreduce #2", 61.0};
  report.peers.push_back({3, false, "silent", 0, 0, 0.0, ""});
  const json record = json::parse(IncidentRecorder::record_json(report, capture_thread_stacks({})));
  EXPECT_EQ(record["incident"], "run-1");
  EXPECT_EQ(record["rank"], 2);
  EXPECT_EQ(record["host"], "nodeB");
  EXPECT_EQ(record["step"], 406);
  EXPECT_EQ(record["cause"], "timeout");
  EXPECT_EQ(record["stuck"]["seq"], 2);
  EXPECT_EQ(record["peers"][0]["state"], "silent");
  bool seen = false;
  for (const auto& c : record["channels"]) {
    if (c["channel"] != "test-channel") continue;
    seen = true;
    EXPECT_EQ(c["open"]["seq"], 2);
    ASSERT_EQ(c["history"].size(), 2u);
    EXPECT_EQ(c["history"][0]["label"], "gradient bucket 0");
    EXPECT_FALSE(c["history"][0]["end"].is_null());
    EXPECT_TRUE(c["history"][1]["end"].is_null());
  }
  EXPECT_TRUE(seen);
  EXPECT_FALSE(record["threads"].empty());
  EXPECT_EQ(incident_record_problem(record), std::nullopt) << "the recorder's own record fits the schema";
  report.stuck.reset();
  EXPECT_EQ(incident_record_problem(json::parse(IncidentRecorder::record_json(report, {}))), std::nullopt);
}

// A record of the wrong shape (a hand-edited or damaged file) is named and skipped, not a crash:
// every field the verdict reads is checked for its type first.
TEST(IncidentRecord, WronglyTypedFieldsAreSkippedWithTheirPath) {
  const json good = {{"incident", "r"}, {"rank", 0}, {"world_size", 1}, {"cause", "fatal"}, {"reason", "why"}};
  EXPECT_EQ(incident_record_problem(good), std::nullopt);
  auto with = [&](const char* key, json value) {
    json bad = good;
    bad[key] = std::move(value);
    return incident_record_problem(bad).value_or("accepted");
  };
  EXPECT_EQ(with("rank", "1"), "rank: expected a number");
  EXPECT_EQ(with("stuck", 5), "stuck: expected an object or null");
  EXPECT_EQ(with("threads", json::array({{{"frames", json::array({{{"module", 7}}})}}})),
            "threads[0].frames[0].module: expected a string");
  EXPECT_EQ(with("channels", json::array({{{"open", {{"seq", "x"}}}}})), "channels[0].open.seq: expected a number");
  EXPECT_EQ(with("peers", json::array({"rank 1"})), "peers[0]: expected an object");
  EXPECT_EQ(incident_record_problem(json::array()), "the record is not an object");
}

// A line an earlier writer left unfinished (killed mid-write) is ended before this rank's record, so
// the record stays readable; a symlink planted at the file's path is not followed.
TEST(IncidentFile, ATornLineCostsOnlyItselfAndASymlinkIsNotFollowed) {
  testing_support::TempDir dir;
  const std::string path = dir.file("incident.jsonl");
  { std::ofstream(path) << R"({"incident":"earlier","rank":0,"threads":[{"tid":1,"frames":[{"addr)"; }
  RankInfo rank;
  rank.rank = 1;
  rank.world_size = 2;
  IncidentRecorder::configure(rank, path, "run-torn");
  IncidentReport report;
  report.cause = IncidentCause::Signal;  // withdrawn below, so the next write may happen
  report.reason = "SIGTERM while waiting";
  ASSERT_TRUE(IncidentRecorder::write(report, std::chrono::milliseconds(50)));
  IncidentRecorder::withdraw_signal_record();
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << "the torn line, the record, its withdrawal";
  EXPECT_TRUE(json::parse(lines[0], nullptr, false).is_discarded());
  const json written = json::parse(lines[1], nullptr, false);
  ASSERT_FALSE(written.is_discarded()) << lines[1].substr(0, 200);
  EXPECT_EQ(written.value("reason", ""), "SIGTERM while waiting");
  EXPECT_EQ(incident_record_problem(written), std::nullopt);

  { std::ofstream(dir.file("victim")) << "keep me"; }
  std::filesystem::create_symlink(dir.file("victim"), dir.file("planted.jsonl"));
  IncidentRecorder::configure(rank, dir.file("planted.jsonl"), "run-link");
  report.cause = IncidentCause::Error;
  EXPECT_FALSE(IncidentRecorder::write(report));
  std::ifstream victim(dir.file("victim"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(victim), {}), "keep me");
}

// A hand-made record: rank R at step S, its main thread doing WHAT, on one channel.
json record(int rank, const std::string& cause, std::uint64_t started, std::uint64_t finished, const std::string& what,
            std::vector<double> starts = {}) {
  json channel = {
      {"channel", "grad"}, {"pace", "lockstep"}, {"started", started}, {"finished", finished}, {"open", nullptr}};
  if (started > finished)
    channel["open"] = {{"seq", started}, {"op", "allreduce"}, {"bytes", 4096}, {"label", "bucket 0"}, {"age_s", 5.0}};
  json history = json::array();
  for (std::size_t i = 0; i < starts.size(); ++i)
    history.push_back({{"seq", started - starts.size() + 1 + i},
                       {"op", "allreduce"},
                       {"bytes", 4096},
                       {"label", "bucket 0"},
                       {"start", starts[i]},
                       {"end", nullptr}});
  channel["history"] = history;
  return {{"incident", "r"},
          {"rank", rank},
          {"world_size", 3},
          {"cause", cause},
          {"origin", 0},
          {"reason", "why"},
          {"step", 406},
          {"time", 100.0 + rank},
          {"stuck", nullptr},
          {"peers", json::array()},
          {"channels", json::array({channel})},
          {"threads",
           json::array({{{"role", "main"}, {"activity", what}, {"activity_s", 61.0}, {"frames", json::array()}}})}};
}

// Optional fields may be absent, not only null: a channel without "open", a call without "end"
// (reading them through a const operator[] was a use after free, found by fuzz_incident).
TEST(IncidentVerdict, RecordsWithoutOptionalFieldsAreExplained) {
  json r = record(0, "fatal", 5, 5, "forward", {1.0, 2.0});
  r["channels"][0].erase("open");
  for (auto& call : r["channels"][0]["history"]) call.erase("end");
  r.erase("stuck");
  const auto verdict = explain_incident({r}, /*all_ranks=*/true);
  EXPECT_NE(verdict.details.find("grad: 5 calls done"), std::string::npos) << verdict.details;
}

TEST(IncidentVerdict, NamesTheRankThatNeverReachedTheStuckCall) {
  json origin = record(0, "timeout", 812, 811, "exposed comm");
  origin["stuck"] = {{"channel", "grad"}, {"seq", 812}, {"what", "allreduce #812 (bucket 0)"}, {"age_s", 61.0}};
  const auto v = explain_incident(
      {origin, record(1, "request", 812, 811, "exposed comm"), record(2, "request", 811, 811, "data wait")});
  EXPECT_EQ(v.culprits, std::vector<int>{2});
  EXPECT_EQ(v.verdict,
            "rank 2 never entered allreduce #812 (bucket 0) at step 406; it was in data wait for 61.0 s; all other "
            "ranks waited in #812 on the grad channel");
}

TEST(IncidentVerdict, ARankThatWroteNothingIsTheOneTheOthersWaitedFor) {
  const auto v =
      explain_incident({record(0, "signal", 812, 811, "exposed comm"), record(2, "signal", 812, 811, "backward")});
  EXPECT_EQ(v.culprits, std::vector<int>{1});
  EXPECT_NE(v.verdict.find("rank 1 wrote no record: it died"), std::string::npos) << v.verdict;
  EXPECT_NE(v.verdict.find("the launcher then ended the job (why)"), std::string::npos) << v.verdict;
}

// Rank 1 was killed in the middle of a gradient all-reduce (#12 on "grad"): rank 2 had its share
// and went on to the metrics all-reduce (#47 on "mpi"), while rank 0 still waited in #12 for rank
// 1's. Rank 0 is a waiter, not a rank that never came to #47 (as the verdict once said, under load).
TEST(IncidentVerdict, ARankLeftWaitingInACallTheOthersFinishedIsNoCulprit) {
  auto with_channels = [](json r, std::uint64_t metrics_started, std::uint64_t grad_finished, double metrics_age) {
    json grad = r["channels"][0];
    grad["started"] = 12;
    grad["finished"] = grad_finished;
    grad["open"] = nullptr;
    if (grad_finished < 12)
      grad["open"] = {{"seq", 12}, {"op", "allreduce"}, {"bytes", 4096}, {"label", "bucket 0"}, {"age_s", 5.0}};
    json metrics = r["channels"][0];
    metrics["channel"] = "mpi";
    metrics["started"] = metrics_started;
    metrics["finished"] = 46;
    metrics["open"] = nullptr;
    if (metrics_started > 46)
      metrics["open"] = {
          {"seq", 47}, {"op", "allreduce"}, {"bytes", 176}, {"label", "metrics"}, {"age_s", metrics_age}};
    r["channels"] = json::array({grad, metrics});
    return r;
  };
  const auto v = explain_incident({with_channels(record(0, "signal", 0, 0, "exposed comm"), 46, 11, 0.0),
                                   with_channels(record(2, "signal", 0, 0, "exposed comm"), 47, 12, 6.0)});
  EXPECT_EQ(v.culprits, std::vector<int>{1});
  EXPECT_EQ(v.verdict,
            "rank 1 wrote no record: it died (killed, or crashed without a trace), or is stuck with signals blocked, "
            "or was still computing when the launcher ended the job; rank 0 waited in #12 (allreduce #12 (4.0 KB, "
            "bucket 0)) on the grad channel, which other ranks finished; rank 2 waited in #47 on the mpi channel; "
            "the launcher then ended the job (why)");
}

TEST(IncidentVerdict, WithdrawnRecordsAreNoIncident) {
  // A SIGTERM that was a preemption, while the ranks waited in a slow collective: the run then
  // checkpointed and ended as it should, and each rank withdrew its record.
  const json withdrawn0 = {{"incident", "r"}, {"rank", 0}, {"withdrawn", true}};
  const json withdrawn2 = {{"incident", "r"}, {"rank", 2}, {"withdrawn", true}};
  const auto v = explain_incident({record(0, "signal", 812, 811, "exposed comm"),
                                   record(2, "signal", 812, 811, "backward"), withdrawn0, withdrawn2});
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_EQ(v.verdict.rfind("no incident: every record was withdrawn", 0), 0u) << v.verdict;
}

TEST(IncidentVerdict, ALateRankIsSlowNotHung) {
  json origin = record(0, "timeout", 812, 811, "exposed comm", {10.0});
  origin["stuck"] = {{"channel", "grad"}, {"seq", 812}, {"what", "allreduce #812"}, {"age_s", 3.0}};
  const auto v = explain_incident({origin, record(1, "request", 812, 811, "exposed comm", {10.1}),
                                   record(2, "request", 812, 812, "a long sleep", {13.5})});
  EXPECT_EQ(v.culprits, std::vector<int>{2});
  EXPECT_NE(v.verdict.find("rank 2 entered allreduce #812 3.50 s after the first rank"), std::string::npos)
      << v.verdict;
  EXPECT_NE(v.verdict.find("in a long sleep"), std::string::npos) << v.verdict;
}

TEST(IncidentVerdict, ACrashOutweighsTheRecordsItAskedFor) {
  json crash = record(1, "crash", 811, 811, "forward");
  crash["reason"] = "SIGSEGV (Segmentation fault) in thread 12 at address 0x0";
  crash["time"] = 500.0;  // written after the others' would not matter: a crash is the cause
  const auto v = explain_incident({record(0, "request", 812, 811, "exposed comm"), crash});
  EXPECT_EQ(v.culprits, std::vector<int>{1});
  EXPECT_EQ(v.verdict,
            "rank 1 crashed at step 406 while in forward for 61.0 s: SIGSEGV (Segmentation fault) in thread 12 at "
            "address 0x0 (rank 2 wrote no record)");
}

// A node lost mid-run (its ranks killed at once, no record from them): the survivors' MPI calls fail
// ("Endpoint timeout") and they write 'fatal' records. The ranks that vanished are the culprits, not
// the survivor that reported first (slurm/train_resilient.sbatch leaves out the culprits' nodes).
TEST(IncidentVerdict, AnMpiFailureBesideSilentRanksBlamesTheSilentOnes) {
  json fatal = record(0, "fatal", 101, 100, "checkpoint after step 101");
  fatal["reason"] = "MPI call MPI_Allreduce(...) failed: MPI_ERR_OTHER: known error not in list (mpi_comm.cpp:70)";
  fatal["world_size"] = 4;
  json request = record(1, "request", 101, 100, "checkpoint after step 101");
  request["world_size"] = 4;
  const auto v = explain_incident({fatal, request});
  EXPECT_EQ(v.culprits, (std::vector<int>{2, 3}));
  EXPECT_NE(v.verdict.find("ranks 2, 3 wrote no record: they died (killed, crashed without a trace, or lost with their "
                           "node); rank 0's MPI call failed talking to them at step 406"),
            std::string::npos)
      << v.verdict;
  // Any other fatal error is still its own rank's, silent ranks or not.
  fatal["reason"] = "'/data/x.h5': dataset 'x' sample 5 holds a non-finite input";
  EXPECT_EQ(explain_incident({fatal, request}).culprits, std::vector<int>{0});
}

TEST(IncidentVerdict, AnAgreedErrorIsQuotedAsEveryRankSawIt) {
  json e0 = record(0, "error", 5, 5, ""), e1 = record(1, "error", 5, 5, ""), e2 = record(2, "error", 5, 5, "");
  for (json* e : {&e0, &e1, &e2}) (*e)["reason"] = "ranks out of step: rank 1 differs";
  EXPECT_EQ(explain_incident({e0, e1, e2}).verdict,
            "every rank stopped at step 406: ranks out of step: rank 1 differs");
}

}  // namespace
}  // namespace mnddp
