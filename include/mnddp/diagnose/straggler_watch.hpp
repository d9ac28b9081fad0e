// Straggler blame. DDP's all-reduce evens out the ranks' step times: a slow rank makes every rank
// wait, so in each rank's own timings the slow one looks like the others. What still differs is
// *when* each rank becomes ready to communicate. Each rank notes, per step, when it began its first
// collective of the step (the buffer broadcast of a model with BatchNorm, a SyncBatchNorm all-reduce,
// or else its first gradient bucket: the first point where the others wait for it), on rank 0's
// clock (offsets estimated over MPI at start-up and then every kResyncSeconds, as rank 0's clock
// says: MpiComm::synchronise_clocks).
// Every log interval the sums ride on the metrics all-reduce: the latest and the earliest rank. The
// latest is the interval's straggler when it is later than the earliest by more than max(2 ms, 20%
// of a step), per step (below that, on a node whose cores are shared, scheduling noise alone names
// ranks). Its lateness is split into the time before its batch was ready (data wait,
// and whatever ran before it in the step), forward, and backward up to the first bucket, each
// against the other ranks' mean: the split comes from its own phase sums, which the rank that was
// the straggler of the previous interval sends in slots of their own (a consistent straggler is the
// same rank, so its split is exact; a new one's split follows an interval later).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/diagnose/interval_rider.hpp"
#include "mnddp/observe/run_observer.hpp"

namespace mnddp {

// One interval's finding.
struct IntervalStraggler {
  int rank = -1;                // -1: no rank late by more than the threshold
  double late_s = 0.0;          // per step, against the earliest rank
  bool split_known = false;     // the three parts below are this rank's own
  double before_batch_s = 0.0;  // per step, against the other ranks' mean
  double forward_s = 0.0;
  double backward_s = 0.0;
};

// The run's verdict: the rank that was the interval's straggler most often, if in at least half of
// the intervals; its mean lateness and split over those intervals.
struct StragglerVerdict {
  int rank = -1;  // -1: no consistent straggler
  std::string host;
  int late_intervals = 0;
  int intervals = 0;
  double late_s = 0.0;
  bool split_known = false;
  double before_batch_s = 0.0;
  double forward_s = 0.0;
  double backward_s = 0.0;
};

// Lateness per step below which no rank is named: 2 ms, or a fifth of a step if that is more.
double straggler_threshold(double step_s);

// Collects interval findings into the run's verdict (pure: the unit tests drive it directly).
class StragglerTally {
 public:
  void add(const IntervalStraggler& found);
  StragglerVerdict verdict(const std::vector<std::string>& hosts) const;

 private:
  struct PerRank {
    int count = 0;
    double late_s = 0.0;
    int split_count = 0;
    double before_batch_s = 0.0, forward_s = 0.0, backward_s = 0.0;
  };
  std::vector<PerRank> ranks_;
  int intervals_ = 0;
};

class StragglerWatch final : public IntervalRider, public RunObserver {
 public:
  static constexpr double kResyncSeconds = 120.0;  // steady clocks drift apart by a few ppm

  // Collective over `control`: gathers the host names and synchronises the clocks.
  // `first_bucket_ready`: when this rank's last synchronised backward launched its first bucket.
  StragglerWatch(MpiComm& control, const std::string& host,
                 std::function<std::chrono::steady_clock::time_point()> first_bucket_ready);

  // RunObserver: the step's phases and its end.
  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override;
  void step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin, Clock::time_point end) override;

  // IntervalRider.
  void contribute(ReductionMessage& message, const IntervalPoint& at) override;
  void receive(const ReductionMessage& message, const IntervalPoint& at) override;
  void annotate(StepMetrics& metrics) const override;

  const IntervalStraggler& last_interval() const { return last_; }
  StragglerVerdict verdict() const { return tally_.verdict(hosts_); }

 private:
  double on_root_clock(Clock::time_point t) const;  // seconds since the sync's base, rank 0's clock

  MpiComm& control_;
  std::vector<std::string> hosts_;
  std::function<Clock::time_point()> first_bucket_ready_;
  ClockSync clock_;
  // This step's marks, and the interval's sums (per-step figures summed over its steps).
  Clock::time_point batch_ready_{}, forward_end_{};
  std::int64_t steps_ = 0;
  double ready_sum_ = 0.0;  // first bucket, on rank 0's clock
  double before_batch_ = 0.0, forward_ = 0.0, backward_ = 0.0, step_time_ = 0.0;
  // The slots of the message in flight.
  struct Slots {
    ReductionMessage::Slot latest, earliest, before, forward, backward, step, own_before, own_forward, own_backward,
        resync;
  } slots_{};
  int previous_ = -1;         // the previous interval's straggler: it sends its own sums
  bool mark_pending_ = true;  // the next DataWait is a step's first: mark the collectives from there
  Clock::time_point synced_at_ = Clock::now();
  IntervalStraggler last_;
  StragglerTally tally_;
};

}  // namespace mnddp
