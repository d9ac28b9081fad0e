// Straggler blame: per-step marks on rank 0's clock, reduced with the interval's metrics.
#include "mnddp/diagnose/straggler_watch.hpp"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "mnddp/comm/collective_tracker.hpp"

namespace mnddp {

double straggler_threshold(double step_s) { return std::max(2e-3, 0.2 * step_s); }

void StragglerTally::add(const IntervalStraggler& found) {
  ++intervals_;
  if (found.rank < 0) return;
  if (static_cast<std::size_t>(found.rank) >= ranks_.size()) ranks_.resize(static_cast<std::size_t>(found.rank) + 1);
  PerRank& r = ranks_[static_cast<std::size_t>(found.rank)];
  ++r.count;
  r.late_s += found.late_s;
  if (found.split_known) {
    ++r.split_count;
    r.before_batch_s += found.before_batch_s;
    r.forward_s += found.forward_s;
    r.backward_s += found.backward_s;
  }
}

StragglerVerdict StragglerTally::verdict(const std::vector<std::string>& hosts) const {
  StragglerVerdict v;
  v.intervals = intervals_;
  int best = -1;
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    if (ranks_[r].count > 0 && (best < 0 || ranks_[r].count > ranks_[static_cast<std::size_t>(best)].count))
      best = static_cast<int>(r);
  if (best < 0 || 2 * ranks_[static_cast<std::size_t>(best)].count < intervals_) return v;
  const PerRank& r = ranks_[static_cast<std::size_t>(best)];
  v.rank = best;
  v.host = static_cast<std::size_t>(best) < hosts.size() ? hosts[static_cast<std::size_t>(best)] : "";
  v.late_intervals = r.count;
  v.late_s = r.late_s / r.count;
  v.split_known = r.split_count > 0;
  if (v.split_known) {
    v.before_batch_s = r.before_batch_s / r.split_count;
    v.forward_s = r.forward_s / r.split_count;
    v.backward_s = r.backward_s / r.split_count;
  }
  return v;
}

StragglerWatch::StragglerWatch(MpiComm& control, const std::string& host,
                               std::function<std::chrono::steady_clock::time_point()> first_bucket_ready)
    : control_(control), first_bucket_ready_(std::move(first_bucket_ready)) {
  const CollectiveLabel label("straggler watch set-up");
  hosts_ = allgather_strings(control_, host);
  clock_ = control_.synchronise_clocks();
  spdlog::debug("clock offset to rank 0: {:+.1f} us (+- {:.1f} us)", clock_.offset_s * 1e6, clock_.uncertainty_s * 1e6);
}

double StragglerWatch::on_root_clock(Clock::time_point t) const {
  return std::chrono::duration<double>(t.time_since_epoch()).count() + clock_.offset_s - clock_.base_s;
}

void StragglerWatch::phase(StepPhase phase, Clock::time_point, Clock::time_point end) {
  if (phase == StepPhase::DataWait) {
    batch_ready_ = end;                                       // the last micro-batch's counts
    if (mark_pending_) CollectiveTracker::mark_first_call();  // after the interval's metrics, before forward
    mark_pending_ = false;
  }
  if (phase == StepPhase::Forward) forward_end_ = end;
}

void StragglerWatch::step_finished(std::int64_t, std::int64_t, Clock::time_point begin, Clock::time_point end) {
  // Ready to meet the others: its first collective of the step, the first bucket at the latest.
  const Clock::time_point bucket = first_bucket_ready_();
  const Clock::time_point ready = std::min(bucket, CollectiveTracker::first_call_since_mark().value_or(bucket));
  mark_pending_ = true;
  ++steps_;
  ready_sum_ += on_root_clock(ready);
  before_batch_ += RunObserver::seconds(begin, batch_ready_);
  forward_ += RunObserver::seconds(batch_ready_, std::min(forward_end_, ready));
  backward_ += std::max(0.0, RunObserver::seconds(forward_end_, ready));
  step_time_ += RunObserver::seconds(begin, end);
}

void StragglerWatch::contribute(ReductionMessage& message, const IntervalPoint&) {
  const int me = control_.rank();
  const bool mine = previous_ == me;
  slots_.latest = message.add_max_rank(ready_sum_, me);
  slots_.earliest = message.add_max_rank(-ready_sum_, me);
  slots_.before = message.add_sum(before_batch_);
  slots_.forward = message.add_sum(forward_);
  slots_.backward = message.add_sum(backward_);
  slots_.step = message.add_sum(step_time_);
  slots_.own_before = message.add_sum(mine ? before_batch_ : 0.0);
  slots_.own_forward = message.add_sum(mine ? forward_ : 0.0);
  slots_.own_backward = message.add_sum(mine ? backward_ : 0.0);
  // Rank 0's clock decides when to synchronise again, so every rank decides alike.
  const bool due = me == 0 && RunObserver::seconds(synced_at_, Clock::now()) > kResyncSeconds;
  slots_.resync = message.add_sum(due ? 1.0 : 0.0);
}

void StragglerWatch::receive(const ReductionMessage& m, const IntervalPoint&) {
  const double steps = static_cast<double>(std::max<std::int64_t>(steps_, 1));
  const double ranks = control_.size();
  const double late = (m.max_value(slots_.latest) + m.max_value(slots_.earliest)) / steps;  // max - min
  const double step_s = m.sum(slots_.step) / ranks / steps;
  last_ = IntervalStraggler{};
  if (steps_ > 0 && control_.size() > 1 && late > straggler_threshold(step_s)) {
    last_.rank = m.max_rank(slots_.latest);
    last_.late_s = late;
    if (previous_ == last_.rank) {
      // Its own per-step phases against the mean of the others'.
      auto excess = [&](ReductionMessage::Slot own, ReductionMessage::Slot all) {
        return (m.sum(own) - (m.sum(all) - m.sum(own)) / (ranks - 1)) / steps;
      };
      last_.split_known = true;
      last_.before_batch_s = excess(slots_.own_before, slots_.before);
      last_.forward_s = excess(slots_.own_forward, slots_.forward);
      last_.backward_s = excess(slots_.own_backward, slots_.backward);
    }
  }
  if (steps_ > 0) tally_.add(last_);
  previous_ = last_.rank;
  steps_ = 0;
  ready_sum_ = before_batch_ = forward_ = backward_ = step_time_ = 0.0;
  if (m.sum(slots_.resync) > 0) {
    const CollectiveLabel label("straggler watch clock sync");
    clock_ = control_.synchronise_clocks();
    synced_at_ = Clock::now();
  }
}

void StragglerWatch::annotate(StepMetrics& metrics) const {
  metrics.straggler_rank = last_.rank;
  if (last_.rank < 0) return;
  metrics.straggler_host = hosts_[static_cast<std::size_t>(last_.rank)];
  metrics.straggler_late_s = last_.late_s;
  const double unknown = std::nan("");
  metrics.straggler_before_batch_s = last_.split_known ? last_.before_batch_s : unknown;
  metrics.straggler_forward_s = last_.split_known ? last_.forward_s : unknown;
  metrics.straggler_backward_s = last_.split_known ? last_.backward_s : unknown;
}

}  // namespace mnddp
