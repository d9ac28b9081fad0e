// Memory per rank: docs/PLAN.md, "Memory" (and docs/ZERO.md's table, which this follows).
#include "mnddp/plan/memory_model.hpp"

#include <algorithm>

namespace mnddp {

MemoryPrediction predict_memory(const MeasuredMemory& m, int ranks, int zero_stage) {
  const double n = std::max(1, ranks);
  MemoryPrediction p;
  p.parameters = m.parameters;
  // The measurement ran at --zero 0 on one rank: whatever its peak held beyond the model's state
  // and the process's baseline is activations (and autograd's temporaries).
  p.activations = std::max(0.0, m.peak - m.baseline - m.parameters - m.gradients - m.optimizer_state);
  p.buffers = m.baseline;
  p.gradients = m.gradients;
  p.optimizer_state = m.optimizer_state;
  if (zero_stage >= 1 && ranks > 1) {
    p.optimizer_state = m.optimizer_state / n;
    p.buffers += m.bucket_cap;  // the parameter all-gather's bucket
  }
  if (zero_stage == 2 && ranks > 1) {
    // Only this rank's chunks stay; the buckets whose reduce-scatter is in flight (about three
    // while backward fills the next) come and go.
    p.gradients = m.gradients / n + std::min(m.gradients, 3 * m.bucket_cap);
  }
  return p;
}

}  // namespace mnddp
