// FusedSgd against torch::optim::SGD: bitwise the same parameters and momentum buffers after several
// steps, for every option combination, sizes with every tail length of the vector loops, channels-last
// weights and the tensors its pass does not take; and its NaN/Inf report.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <limits>
#include <vector>

#include "mnddp/train/fused_sgd.hpp"

namespace mnddp {
namespace {

struct Case {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

std::vector<at::Tensor> make_params(const std::vector<std::vector<std::int64_t>>& shapes, at::ScalarType type,
                                    bool channels_last) {
  std::vector<at::Tensor> params;
  for (const auto& shape : shapes) {
    at::Tensor p = at::randn(shape, at::TensorOptions().dtype(type));
    if (channels_last && shape.size() == 4) p = p.contiguous(at::MemoryFormat::ChannelsLast);
    params.push_back(p.set_requires_grad(true));
  }
  return params;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

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
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const std::int64_t where : {0, 63, 64, 1000, 1036}) {
      auto params = make_params({{1037}, {5}}, at::kFloat, false);
      FusedSgd sgd(params, torch::optim::SGDOptions(0.1).momentum(0.9));
      for (auto& p : params) p.mutable_grad() = at::ones_like(p);
      sgd.step();
      EXPECT_FALSE(sgd.nonfinite_seen());
      params[0].mutable_grad()[where] = bad;
      sgd.step();
      EXPECT_TRUE(sgd.nonfinite_seen()) << bad << " at " << where;
      params[0].mutable_grad()[where] = 1.0f;
      sgd.step();
      EXPECT_FALSE(sgd.nonfinite_seen()) << "the report is of the last step only";
    }
  }
  // The path of torch's operations reports too (a double parameter).
  auto params = make_params({{9}}, at::kDouble, false);
  FusedSgd sgd(params, torch::optim::SGDOptions(0.1));
  params[0].mutable_grad() = at::ones_like(params[0]);
  params[0].mutable_grad()[4] = std::numeric_limits<double>::quiet_NaN();
  sgd.step();
  EXPECT_TRUE(sgd.nonfinite_seen());
}

}  // namespace
}  // namespace mnddp
