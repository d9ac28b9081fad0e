// What a training step on a GPU keeps on the device instead of reading it on the
// host every step (F5 of the GPU review: .item() on the loss, the NaN/Inf verdict and the loss
// scaler's are each a host wait, and a waiting host cannot queue the next step ahead of the GPU).
// The ledger adds the step's loss up on the device, turns each step's found-inf flag into the
// optimizer's skip flag, and remembers the first step that had NaN/Inf gradients; read() brings it
// all to the host in one transfer, at a log interval, before a checkpoint and at the end.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "mnddp/choices.hpp"

namespace mnddp {

class StepLedger {
 public:
  // `scaler`: the fp16 loss scaler decides (skipping is its normal business); else `policy` does.
  StepLedger(c10::Device device, NonfiniteGradients policy, bool scaler);

  // One micro-batch's loss (this rank's, unscaled) into the step's: loss / accumulation, in double,
  // as the CPU path adds it on the host.
  void add_micro_loss(const at::Tensor& loss, int accumulation);
  // The skip flag for this step's update, from its found-inf flag (one float, 1 = NaN/Inf seen):
  // the flag itself, or under --on-nonfinite abort a flag that stays up from the first bad step on,
  // so that the parameters stay those from before it until the host reads the verdict and stops.
  // Ends the step: its loss joins the interval's.
  at::Tensor gate(const at::Tensor& found_inf, std::int64_t step);
  // A step without a verdict (one the host took, or none): its loss joins the interval's.
  void end_step();

  struct Reading {
    double loss_sum = 0.0;            // of the steps' losses since the last reading
    std::int64_t skipped = 0;         // steps whose update the gate skipped since then
    std::int64_t first_skipped = -1;  // the first of them (-1: none)
    double first_skipped_loss = 0.0;  // this rank's loss at that step
  };
  // One transfer to the host (a host wait); the sums start again.
  Reading read();

 private:
  NonfiniteGradients policy_;
  bool scaler_;
  at::Tensor step_loss_;      // double [1]: the step in progress
  at::Tensor interval_loss_;  // double [1]: the steps since the last reading
  at::Tensor skipped_;        // double [1]
  at::Tensor first_skipped_;  // double [1]: a step number, -1 for none
  at::Tensor first_loss_;     // double [1]
  at::Tensor stuck_;          // float [1]: --on-nonfinite abort's flag, up since the first bad step
};

}  // namespace mnddp
