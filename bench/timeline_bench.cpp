// What --trace costs per event, in one process: recording a step's worth of events as the trainer
// and the communication layer do (five phase spans and a step span through TraceObserver, a
// collective's async span with its JSON args through CollectiveTracker, a channel's ScopedSpan), and
// writing them to the trace file at each interval; against the same calls with tracing off. Prints
// nanoseconds per step for both, and per event. Run with one rank: mpirun -np 1 mnddp-bench-timeline.
#include <fmt/format.h>
#include <mpi.h>

#include <time.h>

#include <filesystem>
#include <utility>

#include "bench_util.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/observe/timeline.hpp"
#include "mnddp/observe/trace_observer.hpp"

using namespace mnddp;
using bench::Clock;

namespace {

constexpr int kSteps = 200000;
constexpr int kInterval = 50;
constexpr int kBuckets = 3;  // per step: the MLP demo's buckets with 0.05 MiB caps

// Records what TraceObserver records, and drops it at each interval: the cost of recording alone.
class RecordOnly final : public RunObserver {
 public:
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override {
    timeline::span("step", std::string(phase_name(phase)), begin, end);
  }
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override {
    timeline::span("step", fmt::format("step {}", step), begin, end, fmt::format("{{\"epoch\":{}}}", epoch));
  }
  void interval(const StepMetrics&) override { timeline::drain(); }
};

// One step as the loop and the MPI channel report it; `observer` null: tracing off.
void step(RunObserver* observer, CollectiveTracker& tracker, int index) {
  const auto t = Clock::now();
  if (observer != nullptr)
    for (std::size_t p = 0; p < kStepPhaseCount; ++p) observer->phase(static_cast<StepPhase>(p), t, t);
  for (int b = 0; b < kBuckets; ++b) {
    const CollectiveLabel label("gradient bucket 0 (first: fc2.weight)");
    const std::uint64_t seq = tracker.begin("allreduce", 4096);
    {
      const timeline::ScopedSpan running(
          "comm", timeline::enabled() ? CollectiveLabel::current() + " (running)" : std::string());
    }
    tracker.end(seq);
  }
  if (observer != nullptr) {
    observer->step_finished(index, 0, t, Clock::now());
    if (index % kInterval == 0) observer->interval(StepMetrics{});
  }
}

// CPU seconds of this thread, or of the whole process (the trace's writer thread included).
double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Nanoseconds per step of the loop's thread and of the process, for kSteps steps of `observer`.
std::pair<double, double> run_steps(RunObserver* observer, CollectiveTracker& tracker) {
  const double thread = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  const double process = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 1; i <= kSteps; ++i) step(observer, tracker, i);
  if (observer != nullptr) observer->run_finished({});  // the trace's last write counts
  return {(cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread) / kSteps * 1e9,
          (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process) / kSteps * 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    MpiComm comm;
    CollectiveTracker tracker("bench");
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("mnddp-timeline-bench-{}", getpid());
    // Per round: [off, recording only, recording and writing] x [loop thread, process].
    std::vector<double> loop[3];
    std::vector<double> process[3];
    auto keep = [&](int mode, std::pair<double, double> ns) {
      loop[mode].push_back(ns.first);
      process[mode].push_back(ns.second);
    };
    for (int round = 0; round < 5; ++round) {
      keep(0, run_steps(nullptr, tracker));
      {
        RecordOnly record;
        timeline::enable(true);
        keep(1, run_steps(&record, tracker));
        timeline::enable(false);
        timeline::drain();
      }
      {
        TraceObserver trace(comm, dir.string(), "bench");
        keep(2, run_steps(&trace, tracker));
      }
      std::filesystem::remove_all(dir);
    }
    const int events = static_cast<int>(kStepPhaseCount) + 1 + 2 * kBuckets;
    auto extra = [&](std::vector<double>* v, int mode) { return bench::median(v[mode]) - bench::median(v[0]); };
    fmt::print(
        "per step ({} events), CPU time: {:.0f} ns without tracing; recording: +{:.0f} ns ({:.0f} ns an event); "
        "with the trace file: +{:.0f} ns on the loop's thread ({:.0f} ns an event), +{:.0f} ns in all "
        "(the writer thread's included, {:.0f} ns an event)\n",
        events, bench::median(loop[0]), extra(loop, 1), extra(loop, 1) / events, extra(loop, 2),
        extra(loop, 2) / events, extra(process, 2), extra(process, 2) / events);
  }
  MPI_Finalize();
}
