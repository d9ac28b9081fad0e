// Memory per rank on N ranks, from one rank's measurement: parameters, gradients and optimizer
// state from their sizes (split across ranks by --zero, as docs/ZERO.md tabulates), activations
// and the rest from the measured peak. docs/PLAN.md, "Memory". Pure.
#pragma once

#include <cstddef>

namespace mnddp {

// What one rank measured (bytes).
struct MeasuredMemory {
  double parameters = 0;       // the model's parameters and buffers
  double gradients = 0;        // the gradient buckets
  double optimizer_state = 0;  // every optimizer state tensor
  double peak = 0;             // the device allocator's peak (a GPU), or the peak resident set (a CPU)
  double baseline = 0;         // what the process held before the model was built (a CPU: libraries)
  double bucket_cap = 0;       // --bucket-cap-mb in bytes
};

struct MemoryPrediction {
  double parameters = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double activations = 0;  // the measured peak less everything else
  double buffers = 0;      // ZeRO's buckets in flight, and the baseline
  double total() const { return parameters + gradients + optimizer_state + activations + buffers; }
};

MemoryPrediction predict_memory(const MeasuredMemory& measured, int ranks, int zero_stage);

}  // namespace mnddp
