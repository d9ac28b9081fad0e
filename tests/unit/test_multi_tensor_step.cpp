// The multi-tensor path FusedSgd and FusedAdamW take on a GPU (ATen's _fused_sgd_ and _fused_adamw_,
// one launch per group), run here on the CPU, where ATen has the same kernels: against the one-pass
// path (bitwise torch's own SGD and AdamW), within 1e-6 (F6 of the GPU review: the kernels round a
// few elements differently, by an ulp or so); a device skip flag leaves parameters and state untouched and does not
// count the step; and the host's step counts are brought up to date before anything reads them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "fused_optimizer_checks.hpp"
#include "mnddp/optim/fused_adamw.hpp"
#include "mnddp/optim/fused_sgd.hpp"

namespace mnddp {
namespace {

using fused_checks::clones;
using fused_checks::make_params;

const fused_checks::Shapes kShapes{{64, 3, 3, 3}, {1037}, {10, 7}, {5}};

template <typename State>
const State& state_of(const torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  return static_cast<const State&>(*optimizer.state().at(p.unsafeGetTensorImpl()));
}

// Gives both lists the same random gradients.
void same_gradients(std::vector<at::Tensor>& a, std::vector<at::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const at::Tensor g = at::randn_like(a[i]);
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
}

double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

TEST(MultiTensorStep, SgdKernelIsWithin1e6OfTheOnePassPath) {
  for (const bool nesterov : {false, true})
    for (const bool channels_last : {false, true}) {
      torch::manual_seed(5);
      auto kernel_params = make_params(kShapes, at::kFloat, channels_last);
      auto pass_params = clones(kernel_params);
      const auto options = torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(nesterov).weight_decay(1e-3);
      FusedSgd kernel(kernel_params, options);
      FusedSgd pass(pass_params, options);
      kernel.use_kernels_on_cpu(true);
      for (int step = 0; step < 4; ++step) {
        same_gradients(kernel_params, pass_params);
        ASSERT_TRUE(kernel.gates_on_device());
        ASSERT_FALSE(pass.gates_on_device()) << "host tensors take the one-pass loop";
        kernel.step();
        pass.step();
        ASSERT_LT(max_difference(kernel_params, pass_params), 1e-6)
            << "after step " << step << " (nesterov " << nesterov << ", channels-last " << channels_last << ")";
      }
      for (std::size_t i = 0; i < kernel_params.size(); ++i)
        EXPECT_TRUE(at::allclose(state_of<torch::optim::SGDParamState>(kernel, kernel_params[i]).momentum_buffer(),
                                 state_of<torch::optim::SGDParamState>(pass, pass_params[i]).momentum_buffer(), 0.0,
                                 1e-6));
    }
}

TEST(MultiTensorStep, AdamWKernelIsWithin1e6OfTheOnePassPath) {
  torch::manual_seed(6);
  auto kernel_params = make_params(kShapes, at::kFloat, true);
  auto pass_params = clones(kernel_params);
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
  FusedAdamW kernel(kernel_params, options);
  FusedAdamW pass(pass_params, options);
  kernel.use_kernels_on_cpu(true);
  for (int step = 0; step < 20; ++step) {
    same_gradients(kernel_params, pass_params);
    kernel.step();
    pass.step();
  }
  EXPECT_LT(max_difference(kernel_params, pass_params), 1e-6);
  for (const auto& p : kernel_params) EXPECT_EQ(state_of<torch::optim::AdamWParamState>(kernel, p).step(), 20);
}

// The skip flag: a step with it up changes nothing, parameters, moments, momentum or the step count,
// and the next clean step is the one the other side takes as its next.
TEST(MultiTensorStep, ASkipFlagLeavesEverythingAsItWas) {
  torch::manual_seed(7);
  auto gated = make_params(kShapes, at::kFloat, false);
  auto plain = clones(gated);
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
  FusedAdamW gated_adamw(gated, options);
  FusedAdamW plain_adamw(plain, options);
  gated_adamw.use_kernels_on_cpu(true);
  plain_adamw.use_kernels_on_cpu(true);
  const at::Tensor up = at::ones({1});
  const at::Tensor down = at::zeros({1});
  for (int step = 0; step < 6; ++step) {
    same_gradients(gated, plain);
    if (step % 2 == 1) {
      const auto before = clones(gated);
      gated_adamw.step_unless(up);  // skipped: as if the step never happened
      ASSERT_EQ(max_difference(gated, before), 0.0) << "a skipped step moved a parameter";
      same_gradients(gated, plain);
    }
    gated_adamw.step_unless(down);
    plain_adamw.step();
  }
  EXPECT_EQ(max_difference(gated, plain), 0.0);
  gated_adamw.sync_state_to_host();
  for (std::size_t i = 0; i < gated.size(); ++i) {
    const auto& a = state_of<torch::optim::AdamWParamState>(gated_adamw, gated[i]);
    const auto& b = state_of<torch::optim::AdamWParamState>(plain_adamw, plain[i]);
    EXPECT_EQ(a.step(), 6) << "skipped steps do not count";
    EXPECT_TRUE(at::equal(a.exp_avg(), b.exp_avg()));
    EXPECT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq()));
  }

  // SGD with momentum, its first step skipped: the buffer starts at zero, so the next clean step is
  // a first step after all.
  auto sgd_gated = make_params(kShapes, at::kFloat, false);
  auto sgd_plain = clones(sgd_gated);
  const auto sgd_options = torch::optim::SGDOptions(0.05).momentum(0.9);
  FusedSgd gated_sgd(sgd_gated, sgd_options);
  FusedSgd plain_sgd(sgd_plain, sgd_options);
  gated_sgd.use_kernels_on_cpu(true);
  plain_sgd.use_kernels_on_cpu(true);
  same_gradients(sgd_gated, sgd_plain);
  gated_sgd.step_unless(up);
  EXPECT_EQ(max_difference(sgd_gated, sgd_plain), 0.0);
  for (int step = 0; step < 3; ++step) {
    same_gradients(sgd_gated, sgd_plain);
    gated_sgd.step_unless(down);
    plain_sgd.step();
  }
  EXPECT_EQ(max_difference(sgd_gated, sgd_plain), 0.0);
}

// A resumed state (new state objects, the host's counts) is what the kernel's counts start from.
TEST(MultiTensorStep, ReplacedStateRestartsTheDeviceCounts) {
  torch::manual_seed(8);
  auto params = make_params({{33}}, at::kFloat, false);
  FusedAdamW adamw(params, torch::optim::AdamWOptions(1e-2));
  adamw.use_kernels_on_cpu(true);
  params[0].mutable_grad() = at::ones_like(params[0]);
  adamw.step_unless(at::zeros({1}));
  auto restored =
      std::make_unique<torch::optim::AdamWParamState>(state_of<torch::optim::AdamWParamState>(adamw, params[0]));
  restored->step(41);
  adamw.state()[params[0].unsafeGetTensorImpl()] = std::move(restored);
  adamw.step_unless(at::zeros({1}));
  adamw.sync_state_to_host();
  EXPECT_EQ(state_of<torch::optim::AdamWParamState>(adamw, params[0]).step(), 42);
}

}  // namespace
}  // namespace mnddp
