// LossScaler on CPU tensors: scaling, unscaling, skipping on inf/NaN, backoff and growth.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "mnddp/amp/loss_scaler.hpp"

using mnddp::LossScaler;
using mnddp::LossScalerOptions;

namespace {

at::Tensor param_with_grad(std::vector<float> grad) {
  at::Tensor p = at::zeros({static_cast<std::int64_t>(grad.size())});
  p.mutable_grad() = at::tensor(grad);
  return p;
}

LossScalerOptions enabled(int growth_interval = 2) {
  LossScalerOptions o;
  o.enabled = true;
  o.init_scale = 1024.0;
  o.growth_interval = growth_interval;
  return o;
}

}  // namespace

TEST(LossScaler, DisabledIsTheIdentity) {
  LossScaler scaler(LossScalerOptions{}, at::kCPU);
  at::Tensor loss = at::tensor({2.5f});
  EXPECT_TRUE(at::equal(scaler.scale(loss), loss));
  EXPECT_TRUE(scaler.unscale({param_with_grad({std::numeric_limits<float>::infinity()})}));
}

TEST(LossScaler, ScalesAndUnscales) {
  LossScaler scaler(enabled(), at::kCPU);
  EXPECT_FLOAT_EQ(scaler.scale(at::tensor({0.5f})).item<float>(), 512.0f);
  at::Tensor p = param_with_grad({1024.0f, -2048.0f});
  EXPECT_TRUE(scaler.unscale({p}));
  EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(p.grad()[1].item<float>(), -2.0f);
}

TEST(LossScaler, OverflowIsReportedAndHalvesTheScale) {
  LossScaler scaler(enabled(), at::kCPU);
  EXPECT_FALSE(scaler.unscale({param_with_grad({1.0f, std::numeric_limits<float>::quiet_NaN()})}));
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 512.0);
}

TEST(LossScaler, GrowsAfterTheIntervalOfCleanSteps) {
  LossScaler scaler(enabled(/*growth_interval=*/2), at::kCPU);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(scaler.unscale({param_with_grad({1.0f})}));
    scaler.update();
  }
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 2048.0);
}
