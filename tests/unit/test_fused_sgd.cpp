// FusedSgd against torch::optim::SGD: bitwise the same parameters and momentum buffers after several
// steps, for every option combination, sizes with every tail length of the vector loops, channels-last
// weights and the tensors its pass does not take; and its NaN/Inf report.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <vector>

#include "fused_optimizer_checks.hpp"
#include "mnddp/optim/fused_sgd.hpp"

namespace mnddp {
namespace {

using fused_checks::clones;
using fused_checks::make_params;
using fused_checks::Shapes;

struct Case {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

// Several steps with the same fresh gradients on both sides; true when everything stayed bitwise equal.
void expect_bitwise_equal(const Case& c, const std::vector<std::vector<std::int64_t>>& shapes, at::ScalarType type,
                          bool channels_last) {
  torch::manual_seed(7);
  auto ours_params = make_params(shapes, type, channels_last);
  auto torch_params = clones(ours_params);
  auto options = torch::optim::SGDOptions(0.05)
                     .momentum(c.momentum)
                     .dampening(c.dampening)
                     .weight_decay(c.weight_decay)
                     .nesterov(c.nesterov);
  FusedSgd ours(ours_params, options);
  torch::optim::SGD reference(torch_params, options);
  for (int step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < ours_params.size(); ++i) {
      at::Tensor g = at::randn_like(ours_params[i]) * (step + 1);
      ours_params[i].mutable_grad() = g.clone();
      torch_params[i].mutable_grad() = g.clone();
    }
    ours.step();
    reference.step();
    ASSERT_FALSE(ours.nonfinite_seen());
    for (std::size_t i = 0; i < ours_params.size(); ++i) {
      ASSERT_TRUE(at::equal(ours_params[i], torch_params[i]))
          << "parameter " << i << " after step " << step << ": max difference "
          << (ours_params[i] - torch_params[i]).abs().max().item<double>();
      if (c.momentum == 0) continue;
      const auto& a = static_cast<torch::optim::SGDParamState&>(*ours.state().at(ours_params[i].unsafeGetTensorImpl()));
      const auto& b =
          static_cast<torch::optim::SGDParamState&>(*reference.state().at(torch_params[i].unsafeGetTensorImpl()));
      ASSERT_TRUE(at::equal(a.momentum_buffer(), b.momentum_buffer())) << "momentum buffer " << i;
      ASSERT_EQ(a.momentum_buffer().strides(), b.momentum_buffer().strides()) << "momentum buffer " << i;
    }
  }
}

const std::vector<Case> kCases = {{0.0, 0.0, 0.0, false}, {0.9, 0.0, 0.0, false},  {0.9, 0.0, 5e-4, false},
                                  {0.9, 0.0, 5e-4, true}, {0.9, 0.1, 1e-2, false}, {0.0, 0.0, 1e-2, false}};

TEST(FusedSgd, BitwiseTorchSgdOnEveryTailLength) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (std::int64_t n = 1; n <= 70; ++n) shapes.push_back({n});  // every tail of 8-, 16- and 64-wide loops
  shapes.push_back({513, 257});
  for (const auto& c : kCases) expect_bitwise_equal(c, shapes, at::kFloat, false);
}

TEST(FusedSgd, BitwiseTorchSgdOnChannelsLastWeights) {
  for (const auto& c : kCases) expect_bitwise_equal(c, {{16, 3, 5, 5}, {7, 9, 3, 3}, {16}}, at::kFloat, true);
}

TEST(FusedSgd, TorchsOperationsForWhatThePassDoesNotTake) {
  for (const auto& c : kCases) expect_bitwise_equal(c, {{33}, {4, 5}}, at::kDouble, false);
}

TEST(FusedSgd, ReportsNanAndInfWhereverTheyAre) {
  fused_checks::expect_nonfinite_reported<FusedSgd>(torch::optim::SGDOptions(0.1).momentum(0.9));
}

}  // namespace
}  // namespace mnddp
