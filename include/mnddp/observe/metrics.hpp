// MetricsWriter: rank 0's JSON-lines record of training (one object per logged step), for plots
// and for tests that read numbers instead of parsing log text.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "mnddp/task/metric.hpp"

namespace mnddp {

struct StepMetrics {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  double loss = 0.0;
  double lr = 0.0;
  double loss_scale = 0.0;          // fp16's dynamic loss scale; 0 without one
  double samples_per_second = 0.0;  // global: all ranks
  double step_time_s = 0.0;         // mean over the interval
  double data_wait_s = 0.0;         // mean time per step spent waiting for the loader
  double exposed_comm_s = 0.0;      // mean time per step spent waiting for all-reduces after backward
  // Mean over ranks and steps of the host's waits on the GPU inside a step (host_waits.hpp): 0 is
  // the goal; the log interval's own read of the loss is not inside a step.
  double host_waits_per_step = 0.0;
  // The interval's straggler (diagnose/straggler_watch.hpp): the rank that reached its first gradient
  // bucket last, by more than the threshold; -1: none. Its lateness per step, and (when known) the
  // split of it into the time before its batch was ready, forward and backward, each against the
  // other ranks' mean; the split's parts are NaN when not known.
  int straggler_rank = -1;
  std::string straggler_host;
  double straggler_late_s = 0.0;
  double straggler_before_batch_s = 0.0;
  double straggler_forward_s = 0.0;
  double straggler_backward_s = 0.0;
};

struct EvalMetrics {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::vector<Metric> metrics;  // the task's: loss first, then accuracy, r2, perplexity, ...
  std::int64_t samples = 0;
};

class MetricsWriter {
 public:
  // An empty path disables the writer. Appends, so a resumed run continues one file.
  explicit MetricsWriter(const std::string& path);
  bool enabled() const { return out_.is_open(); }
  void write(const StepMetrics& m);
  void write(const EvalMetrics& m);
  void write_line(const std::string& json);  // an object already serialised, on one line

 private:
  std::ofstream out_;
};

}  // namespace mnddp
