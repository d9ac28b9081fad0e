// The ledger a GPU's training steps keep on the device, here on CPU tensors (the same operations):
// the interval's loss is what the host's double arithmetic gives, bit for bit; --on-nonfinite abort's
// flag stays up from the first bad step on; skip and the loss scaler skip only the bad steps; a
// reading names the first bad step and its loss, and starts the sums again.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "mnddp/train/step_ledger.hpp"

namespace mnddp {
namespace {

const c10::Device kCpu(c10::kCPU);

at::Tensor flag(float value) { return at::full({1}, value); }

TEST(StepLedger, TheLossIsTheHostsDoubleArithmetic) {
  StepLedger ledger(kCpu, NonfiniteGradients::Abort, false);
  double host = 0.0;
  const float losses[] = {2.302585f, 1.7f, 0.33333334f, 1e-7f, 12.5f, 0.1f};
  for (int step = 0; step < 2; ++step) {
    double step_loss = 0.0;
    for (int micro = 0; micro < 3; ++micro) {
      const float loss = losses[step * 3 + micro];
      ledger.add_micro_loss(at::scalar_tensor(loss), 3);
      step_loss += static_cast<double>(loss) / 3;
    }
    host += step_loss;
    ledger.gate(flag(0), step + 1);
  }
  const StepLedger::Reading reading = ledger.read();
  EXPECT_EQ(reading.loss_sum, host);  // bitwise
  EXPECT_EQ(reading.skipped, 0);
  EXPECT_EQ(reading.first_skipped, -1);
  EXPECT_EQ(ledger.read().loss_sum, 0.0) << "a reading starts the sums again";
}

TEST(StepLedger, AbortKeepsTheFlagUpFromTheFirstBadStep) {
  StepLedger ledger(kCpu, NonfiniteGradients::Abort, false);
  for (std::int64_t step = 1; step <= 6; ++step) {
    ledger.add_micro_loss(at::scalar_tensor(step == 3 ? std::numeric_limits<float>::quiet_NaN() : 1.0f), 1);
    const at::Tensor skip = ledger.gate(flag(step == 3 ? 1.0f : 0.0f), step);
    EXPECT_EQ(skip.item<float>(), step >= 3 ? 1.0f : 0.0f) << "step " << step;
  }
  const StepLedger::Reading reading = ledger.read();
  EXPECT_EQ(reading.first_skipped, 3);
  EXPECT_TRUE(std::isnan(reading.first_skipped_loss));
  EXPECT_EQ(reading.skipped, 4);  // steps 3 to 6
}

TEST(StepLedger, SkipAndTheScalerSkipOnlyTheBadSteps) {
  for (const bool scaler : {false, true}) {
    StepLedger ledger(kCpu, scaler ? NonfiniteGradients::Abort : NonfiniteGradients::Skip, scaler);
    for (std::int64_t step = 1; step <= 5; ++step) {
      ledger.add_micro_loss(at::scalar_tensor(static_cast<float>(step)), 1);
      const bool bad = step == 2 || step == 4;
      EXPECT_EQ(ledger.gate(flag(bad ? 1.0f : 0.0f), step).item<float>(), bad ? 1.0f : 0.0f);
    }
    const StepLedger::Reading reading = ledger.read();
    EXPECT_EQ(reading.skipped, 2);
    EXPECT_EQ(reading.first_skipped, 2);
    EXPECT_EQ(reading.first_skipped_loss, 2.0);
    EXPECT_EQ(reading.loss_sum, 15.0);
    EXPECT_EQ(ledger.read().skipped, 0);
  }
}

}  // namespace
}  // namespace mnddp
