// Something that rides on the log interval's all-reduce (TrainingLog::report): it adds its fields to
// the interval's message and reads them back reduced over the ranks, so it costs no collective of its
// own. The consistency check and the straggler figures travel this way.
#pragma once

#include <cstdint>

#include "mnddp/comm/reduction_message.hpp"
#include "mnddp/observe/metrics.hpp"

namespace mnddp {

struct IntervalPoint {
  std::int64_t step = 0;        // the interval's last step
  std::int64_t first_step = 0;  // its first step (earlier than this invocation's first, when resumed)
  bool last = false;            // the run's last interval
};

class IntervalRider {
 public:
  virtual ~IntervalRider() = default;
  virtual void contribute(ReductionMessage& message, const IntervalPoint& at) = 0;
  // Collective: every rank calls it with the same reduced message, and may throw an agreed Error.
  virtual void receive(const ReductionMessage& message, const IntervalPoint& at) = 0;
  // Adds what it found to the interval's metrics (logged and written by rank 0).
  virtual void annotate(StepMetrics& /*metrics*/) const {}
};

}  // namespace mnddp
