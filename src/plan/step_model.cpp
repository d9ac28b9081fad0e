// The step on N ranks from one rank's measurement: docs/PLAN.md, "The step".
#include "mnddp/plan/step_model.hpp"

#include <algorithm>

namespace mnddp {

std::vector<BucketEvent> bucket_events(const MeasuredStep& step, const BucketLimits& limits, double bytes_factor) {
  const auto plan = plan_buckets(step.gradient_bytes, step.keys, limits);
  std::vector<BucketEvent> events;
  events.reserve(plan.size());
  for (const auto& members : plan) {
    BucketEvent e;
    for (std::size_t i : members) {
      e.ready_s = std::max(e.ready_s, step.ready_s[i]);
      e.bytes += static_cast<double>(step.gradient_bytes[i]) * bytes_factor;
    }
    events.push_back(e);
  }
  return events;
}

double compute_sharing_factor(const NetworkProfile& net, Topology t, int threads) {
  if (net.cores_per_node <= 0) return 1.0;
  const double wanted = static_cast<double>(t.ranks_per_node) * std::max(1, threads);
  return std::max(1.0, wanted / net.cores_per_node);
}

bool cores_shared(const NetworkProfile& net, Topology t, int threads) {
  return net.cores_per_node > 0 && t.ranks() > 1 && t.ranks_per_node * (std::max(1, threads) + 1) > net.cores_per_node;
}

StepPrediction predict_step(const MeasuredStep& step, const NetworkProfile& net, Topology t,
                            const StepOptions& options) {
  const double share = compute_sharing_factor(net, t, step.threads);
  std::vector<BucketEvent> buckets = bucket_events(step, options.buckets, options.gradient_bytes_factor);
  for (auto& b : buckets) b.ready_s *= share;
  const bool scatter = options.zero_stage == 2;
  // CPU ranks move the bytes themselves (MPI's shared-memory copies and the sums): sharing cores
  // slows their collectives as it slows their compute.
  const auto collective = [&](double bytes) {
    return share * (scatter ? reduce_scatter_seconds(net, t, bytes) : allreduce(net, t, bytes).seconds);
  };
  StepPrediction p;
  p.buckets = buckets.size();
  double largest = 0.0;
  for (const auto& b : buckets) {
    p.comm_s += collective(b.bytes);
    if (b.bytes > largest) {
      largest = b.bytes;
      p.algorithm = scatter ? Algorithm::Ring : allreduce(net, t, b.bytes).algorithm;
    }
  }
  const double backward = step.backward_s * share;
  p.exposed_s = std::max(0.0, simulate_bucket_queue(buckets, collective) - backward);
  // CPU ranks with no core to spare for their communication thread: it shares the rank's core with
  // backward (its MPI calls copy, sum and poll on it), so overlap hides nothing.
  if (cores_shared(net, t, step.threads)) p.exposed_s = p.comm_s;
  // ZeRO: each rank steps its 1/N of the state, then the parameters are all-gathered bucket by
  // bucket (the gradient buckets' sizes), with nothing to hide them behind.
  const int n = t.ranks();
  p.optimizer_s = step.optimizer_s * share / (options.zero_stage > 0 ? n : 1);
  if (options.zero_stage > 0)
    for (const auto& b : bucket_events(step, options.buckets, 1.0))
      p.allgather_s += share * allgather_seconds(net, t, b.bytes);
  p.compute_s = (step.data_wait_s + step.forward_s) * share + backward + p.optimizer_s;
  // The loader thread ran beside the measured step on a core of its own; where the ranks have none
  // to spare, its CPU time comes out of the step's.
  if (cores_shared(net, t, step.threads)) p.compute_s += step.helper_cpu_s * share;
  p.step_s = p.compute_s + p.exposed_s + p.allgather_s;
  return p;
}

}  // namespace mnddp
