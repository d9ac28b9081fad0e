// TraceObserver (--trace DIR): this rank's timeline as Chrome-trace JSON (Perfetto and
// chrome://tracing read it), DIR/rank-NNNNN.trace.json. It turns the loop's phases, steps and
// validations into spans, adds the loss and samples/s as counters every interval, and streams
// whatever else the process recorded (each collective from issue to completion, the MPI channel's
// execution, checkpoint commits) to the file from a thread of its own, once a second: the loop
// only records (~0.2 us an event), and memory stays bounded. Times are
// microseconds from one job-wide origin: a barrier at start-up, so the ranks' files line up (to
// the barrier's exit skew, and the clocks' drift over the run).
#pragma once

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/observe/run_observer.hpp"
#include "mnddp/observe/timeline.hpp"

namespace mnddp {

// DIR/rank-00003.trace.json
std::string trace_file_path(const std::string& directory, int rank);
// The rank whose trace file is named `file_name` ("rank-00003.trace.json" -> 3); nullopt for any
// other name (merged.trace.json included).
std::optional<int> trace_file_rank(std::string_view file_name);

class TraceObserver final : public RunObserver {
 public:
  // Collective over `control` (the barrier that sets the origin). Creates the directory and the
  // file, and starts the process's timeline.
  TraceObserver(Communicator& control, const std::string& directory, const std::string& host);
  ~TraceObserver() override;  // closes the file as valid JSON, whatever ended the run
  TraceObserver(const TraceObserver&) = delete;
  TraceObserver& operator=(const TraceObserver&) = delete;

  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override;
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override;
  void interval(const StepMetrics& m) override;
  void validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                 Clock::time_point end) override;
  void run_finished(const RunOutcome& outcome) override;

 private:
  struct Counters {
    Clock::time_point at;
    double loss = 0.0;
    double samples_per_second = 0.0;
  };
  void write_loop();    // the writer thread: flushes once a second
  void flush_events();  // the timeline's pending events and the counters to the file
  void close();
  double micros(Clock::time_point t) const;

  int rank_;
  std::string path_;
  std::FILE* out_ = nullptr;  // written by the writer thread, then by close() after it is joined
  Clock::time_point origin_;
  std::thread writer_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Counters> counters_;  // the intervals' loss and samples/s, waiting for the writer
};

}  // namespace mnddp
