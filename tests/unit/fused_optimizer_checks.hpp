// What the tests of the one-pass optimizers (test_fused_sgd.cpp, test_fused_adamw.cpp) share: the
// parameters both sides start from, and the NaN/Inf report every fused optimizer must give.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace mnddp::fused_checks {

using Shapes = std::vector<std::vector<std::int64_t>>;

inline std::vector<at::Tensor> make_params(const Shapes& shapes, at::ScalarType type, bool channels_last) {
  std::vector<at::Tensor> params;
  for (const auto& shape : shapes) {
    at::Tensor p = at::randn(shape, at::TensorOptions().dtype(type));
    if (channels_last && shape.size() == 4) p = p.contiguous(at::MemoryFormat::ChannelsLast);
    params.push_back(p.set_requires_grad(true));
  }
  return params;
}

inline std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

// A NaN or an infinity anywhere in a float32 gradient (the pass's vector body and its tail) is
// reported by the step that read it and by no later one; a double gradient (torch's operations'
// path) is reported too.
template <typename Fused, typename Options>
void expect_nonfinite_reported(const Options& options) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    for (const std::int64_t where : {0, 63, 64, 1000, 1036}) {
      auto params = make_params({{1037}, {5}}, at::kFloat, false);
      Fused optimizer(params, options);
      for (auto& p : params) p.mutable_grad() = at::ones_like(p);
      optimizer.step();
      EXPECT_FALSE(optimizer.nonfinite_seen());
      params[0].mutable_grad()[where] = bad;
      optimizer.step();
      EXPECT_TRUE(optimizer.nonfinite_seen()) << bad << " at " << where;
      params[0].mutable_grad()[where] = 1.0f;
      optimizer.step();
      EXPECT_FALSE(optimizer.nonfinite_seen()) << "the report is of the last step only";
    }
  }
  auto params = make_params({{9}}, at::kDouble, false);
  Fused optimizer(params, options);
  params[0].mutable_grad() = at::ones_like(params[0]);
  params[0].mutable_grad()[4] = std::numeric_limits<double>::quiet_NaN();
  optimizer.step();
  EXPECT_TRUE(optimizer.nonfinite_seen());
}

}  // namespace mnddp::fused_checks
