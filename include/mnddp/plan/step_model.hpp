// One training step on N ranks, predicted from one rank's measured step: the backward pass's
// gradient-ready times, the reducer's buckets (the same plan as ddp/bucketing) launched as they
// fill and run one after another on the gradient channel, each all-reduce (or ZeRO's
// reduce-scatter) from the collective model, what is left after backward exposed, then the
// optimizer (on 1/N of the state under ZeRO) and ZeRO's parameter all-gather. docs/PLAN.md,
// "The step". Pure.
#pragma once

#include <cstddef>
#include <vector>

#include "mnddp/ddp/bucketing.hpp"
#include "mnddp/plan/collective_model.hpp"

namespace mnddp {

// One rank's step, measured (seconds, averaged over the measured steps).
struct MeasuredStep {
  double data_wait_s = 0.0;
  double forward_s = 0.0;
  double backward_s = 0.0;
  double optimizer_s = 0.0;
  // Per parameter, in registration order: its gradient's bytes as communicated, the bucket key
  // (dtype and device, as the reducer groups them) and when its gradient was ready, in seconds
  // from the start of backward.
  std::vector<std::size_t> gradient_bytes;
  std::vector<int> keys;
  std::vector<double> ready_s;
  int threads = 1;  // torch threads of the measuring rank (CPU ranks share a node's cores)
  // CPU seconds a step of the rank's other threads (the loader's reads and conversions): on one rank
  // they ran on a core the step did not use; ranks with no core to spare pay them in their step.
  double helper_cpu_s = 0.0;
};

struct StepOptions {
  BucketLimits buckets;
  int zero_stage = 0;
  double gradient_bytes_factor = 1.0;  // --grad-compression bf16|fp16: 0.5
};

struct StepPrediction {
  double step_s = 0.0;
  double compute_s = 0.0;    // data wait, forward, backward and the optimizer, as scaled for sharing
                             // (and the helper threads' CPU time where no core is spare)
  double comm_s = 0.0;       // every gradient collective's time, hidden or not
  double exposed_s = 0.0;    // the gradient collectives' time after backward ended
  double allgather_s = 0.0;  // ZeRO's parameter all-gather (never hidden)
  double optimizer_s = 0.0;
  std::size_t buckets = 0;
  Algorithm algorithm = Algorithm::Ring;  // the largest bucket's
};

// A bucket as the gradient channel sees it: when its last gradient was ready and its size.
struct BucketEvent {
  double ready_s = 0.0;
  double bytes = 0.0;
};

// The buckets of `step` under `limits`, in launch order.
std::vector<BucketEvent> bucket_events(const MeasuredStep& step, const BucketLimits& limits, double bytes_factor);

// The gradient channel runs one collective at a time, each starting when its bucket is ready and
// the one before it has finished. Returns when the last one finishes (seconds from backward's
// start). `seconds(bytes)` is one collective's time.
template <typename CollectiveSeconds>
double simulate_bucket_queue(const std::vector<BucketEvent>& buckets, CollectiveSeconds&& seconds) {
  double free_at = 0.0;
  for (const auto& b : buckets) free_at = (b.ready_s > free_at ? b.ready_s : free_at) + seconds(b.bytes);
  return free_at;
}

// How much slower a rank computes when its node's ranks share too few cores (1 when they do not).
double compute_sharing_factor(const NetworkProfile& net, Topology t, int threads);

// True when a node's CPU ranks have no core to spare for their communication threads (each rank
// needs its torch threads and one more): communication then takes its time from the rank's compute.
bool cores_shared(const NetworkProfile& net, Topology t, int threads);

StepPrediction predict_step(const MeasuredStep& step, const NetworkProfile& net, Topology t,
                            const StepOptions& options);

}  // namespace mnddp
