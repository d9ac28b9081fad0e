// FusedAdamW against torch::optim::AdamW: bitwise the same parameters and moments after several steps
// (the bias corrections change every step), for decay on and off, sizes with every tail length of
// the vector loops, channels-last weights and the tensors its pass does not take (double, amsgrad);
// and its NaN/Inf report.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <vector>

#include "fused_optimizer_checks.hpp"
#include "mnddp/optim/fused_adamw.hpp"

namespace mnddp {
namespace {

using fused_checks::clones;
using fused_checks::make_params;
using fused_checks::Shapes;

const torch::optim::AdamWParamState& state_of(const torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  return static_cast<const torch::optim::AdamWParamState&>(*optimizer.state().at(p.unsafeGetTensorImpl()));
}

void expect_bitwise_equal(const torch::optim::AdamWOptions& options, const Shapes& shapes, at::ScalarType type,
                          bool channels_last) {
  torch::manual_seed(11);
  auto ours_params = make_params(shapes, type, channels_last);
  auto torch_params = clones(ours_params);
  FusedAdamW ours(ours_params, options);
  torch::optim::AdamW reference(torch_params, options);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < ours_params.size(); ++i) {
      // Gradients of very different sizes, so that eps and the decay matter on some elements.
      at::Tensor g = at::randn_like(ours_params[i]) * at::pow(10.0, at::randint_like(ours_params[i], -9, 2));
      ours_params[i].mutable_grad() = g.clone();
      torch_params[i].mutable_grad() = g.clone();
    }
    ours.step();
    reference.step();
    ASSERT_FALSE(ours.nonfinite_seen());
    for (std::size_t i = 0; i < ours_params.size(); ++i) {
      ASSERT_TRUE(at::equal(ours_params[i], torch_params[i]))
          << "parameter " << i << " (" << ours_params[i].numel() << " values) after step " << step
          << ": max difference " << (ours_params[i] - torch_params[i]).abs().max().item<double>();
      const auto& a = state_of(ours, ours_params[i]);
      const auto& b = state_of(reference, torch_params[i]);
      ASSERT_EQ(a.step(), b.step());
      ASSERT_TRUE(at::equal(a.exp_avg(), b.exp_avg())) << "exp_avg " << i << " after step " << step;
      ASSERT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq())) << "exp_avg_sq " << i << " after step " << step;
      ASSERT_EQ(a.exp_avg().strides(), b.exp_avg().strides()) << "exp_avg " << i;
      ASSERT_EQ(a.max_exp_avg_sq().defined(), b.max_exp_avg_sq().defined());
      if (a.max_exp_avg_sq().defined()) {
        ASSERT_TRUE(at::equal(a.max_exp_avg_sq(), b.max_exp_avg_sq()));
      }
    }
  }
}

std::vector<torch::optim::AdamWOptions> cases() {
  return {torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(0.1),
          torch::optim::AdamWOptions(1e-3).weight_decay(0.0),
          torch::optim::AdamWOptions(0.5).betas({0.5, 0.7}).eps(1e-3).weight_decay(1e-2)};
}

TEST(FusedAdamW, BitwiseTorchAdamWOnEveryTailLength) {
  Shapes shapes;
  for (std::int64_t n = 1; n <= 70; ++n) shapes.push_back({n});  // every tail of 8-, 16- and 64-wide loops
  shapes.push_back({513, 257});
  for (const auto& options : cases()) expect_bitwise_equal(options, shapes, at::kFloat, false);
}

TEST(FusedAdamW, BitwiseTorchAdamWOnChannelsLastWeights) {
  for (const auto& options : cases())
    expect_bitwise_equal(options, {{16, 3, 5, 5}, {7, 9, 3, 3}, {16}}, at::kFloat, true);
}

TEST(FusedAdamW, TorchsOperationsForWhatThePassDoesNotTake) {
  for (const auto& options : cases()) expect_bitwise_equal(options, {{33}, {4, 5}}, at::kDouble, false);
  for (auto options : cases()) expect_bitwise_equal(options.amsgrad(true), {{33}, {4, 5}}, at::kFloat, false);
}

TEST(FusedAdamW, ReportsNanAndInfWhereverTheyAre) {
  fused_checks::expect_nonfinite_reported<FusedAdamW>(torch::optim::AdamWOptions(0.1));
}

}  // namespace
}  // namespace mnddp
