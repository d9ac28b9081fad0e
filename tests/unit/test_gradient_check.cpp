// all_finite, the --on-nonfinite check: the same verdict as torch's isfinite().all() for every float
// dtype, wherever the bad value sits (the vectorised blocks, the tail), and on
// random bit patterns (every NaN payload, both infinities, subnormals).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "mnddp/train/gradient_check.hpp"

using namespace mnddp;

namespace {

const std::vector<at::ScalarType> kFloatTypes{at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};

TEST(AllFinite, FindsNanAndBothInfinitiesAtEveryPosition) {
  for (const auto dtype : kFloatTypes)
    for (const std::int64_t n : {1, 63, 64, 65, 1000})
      for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()})
        for (const std::int64_t at_index : {std::int64_t{0}, n / 2, n - 1}) {
          at::Tensor t = at::randn({n}).to(dtype);
          EXPECT_TRUE(all_finite({t})) << dtype << " n=" << n;
          t[at_index] = bad;
          EXPECT_FALSE(all_finite({t})) << dtype << " n=" << n << " bad " << bad << " at " << at_index;
        }
}

TEST(AllFinite, AgreesWithTorchOnRandomBitPatterns) {
  at::manual_seed(7);
  for (int round = 0; round < 200; ++round) {
    // Random 32-bit patterns, mostly finite: a few exponents set to all ones.
    at::Tensor bits = at::randint(0, 1 << 30, {257}, at::kInt) * 2 + at::randint(0, 2, {257}, at::kInt);
    at::Tensor f = bits.view(at::kFloat);
    if (round % 4 != 0) f = f.where(at::rand({257}) > 0.01, at::zeros_like(f));
    for (const auto& t :
         {f, f.to(at::kDouble), bits.to(at::kShort).view(at::kHalf), bits.to(at::kShort).view(at::kBFloat16)})
      EXPECT_EQ(all_finite({t}), at::isfinite(t).all().item<bool>()) << t.scalar_type() << " round " << round;
  }
}

TEST(AllFinite, HandlesViewsIntegersUndefinedAndEmpty) {
  at::Tensor matrix = at::ones({8, 8});
  matrix[3][5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(all_finite({matrix.t()}));                       // non-contiguous
  EXPECT_TRUE(all_finite({matrix.narrow(0, 4, 4)}));            // a view that misses the NaN
  EXPECT_TRUE(all_finite({at::arange(10), at::Tensor(), {}}));  // integers, undefined
  EXPECT_TRUE(all_finite({}));
  EXPECT_FALSE(all_finite({at::ones({3}), at::Tensor(), matrix}));  // any one of several
}

}  // namespace
