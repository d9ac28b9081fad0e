// The replica check's parameter fingerprint: equal for bitwise-equal parameters, different after the
// change of one bit (the replica-drift fault's), in both the host and the device method.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "mnddp/diagnose/parameter_fingerprint.hpp"

using namespace mnddp;

namespace {

std::vector<at::Tensor> model_like(at::ScalarType type) {
  at::manual_seed(3);
  return {at::randn({64, 32}).to(type), at::randn({32}).to(type), at::randn({5, 7, 3}).to(type)};
}

std::vector<at::Tensor> clone(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(t.clone());
  return out;
}

}  // namespace

TEST(ParameterFingerprint, EqualForEqualParametersAndChangedByOneBit) {
  for (const auto type : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
    const auto a = model_like(type);
    auto b = clone(a);
    EXPECT_EQ(parameter_fingerprint(a, false), parameter_fingerprint(b, false));
    EXPECT_EQ(reduced_fingerprint(a), reduced_fingerprint(b));
    flip_mantissa_bit(b[2]);
    EXPECT_FALSE(at::equal(a[2], b[2])) << "the flip changed nothing";
    EXPECT_NE(parameter_fingerprint(a, false), parameter_fingerprint(b, false)) << at::toString(type);
    EXPECT_NE(reduced_fingerprint(a), reduced_fingerprint(b)) << at::toString(type);
  }
}

TEST(ParameterFingerprint, ReducedMethodSeesOrderAndPositionAndLateChunks) {
  const auto a = model_like(at::kFloat);
  // Two elements swapped: the same multiset of bits, another model.
  auto swapped = clone(a);
  const auto first = swapped[0][0][0].item<float>();
  swapped[0][0][0] = swapped[0][0][1].item<float>();
  swapped[0][0][1] = first;
  EXPECT_NE(reduced_fingerprint(a), reduced_fingerprint(swapped));
  // The parameters in another order.
  EXPECT_NE(reduced_fingerprint(a), reduced_fingerprint({a[1], a[0], a[2]}));
  // A change past the first chunk of a large tensor (chunks of 2^22 elements).
  const at::Tensor big = at::zeros({(1 << 22) + 100});
  at::Tensor changed = big.clone();
  changed[(1 << 22) + 50] = 1.0f;
  EXPECT_NE(reduced_fingerprint({big}), reduced_fingerprint({changed}));
}
