// The zoo's BatchNorm2d and LayerNorm under deterministic algorithms: output and every gradient
// bitwise the same on 1 and 3 threads, in the cases where torch's kernels are not (BatchNorm on
// [N, C, 1, 1], LayerNorm's weight and bias gradients), and equal to torch's modules to rounding.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "mnddp/model/thread_invariant_norms.hpp"

using namespace mnddp;

namespace {

// Deterministic algorithms on, and the thread count put back, for one test.
class DeterministicNorms : public testing::Test {
 protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  void TearDown() override {
    at::globalContext().setDeterministicAlgorithms(false, /*warn_only=*/false);
    at::set_num_threads(threads_);
  }

 private:
  int threads_ = 1;
};

// The output, the input gradient and the parameter gradients of `module` on `input`, with
// `threads` intra-op threads (the parameters' gradients cleared first).
template <typename Module>
std::vector<at::Tensor> forward_backward(Module& module, const at::Tensor& input, int threads) {
  at::set_num_threads(threads);
  for (auto& p : module->parameters()) p.mutable_grad() = at::Tensor();
  const at::Tensor x = input.detach().requires_grad_(true);
  const at::Tensor y = module->forward(x);
  // Positive output gradients: the parameter gradients are then sums without cancellation, whose
  // float32 rounding stays well within expect_close's 1e-5.
  (y * at::linspace(0.5, 1.5, y.numel(), y.options()).view(y.sizes())).sum().backward();
  std::vector<at::Tensor> results{y.detach().clone(), x.grad().clone()};
  for (const auto& p : module->parameters()) results.push_back(p.grad().clone());
  return results;
}

void expect_bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i], b[i])) << "result " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
}

// Each of `ours` within 1e-5 of the largest magnitude of the float64 `reference`'s.
void expect_close(const std::vector<at::Tensor>& ours, const std::vector<at::Tensor>& reference) {
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const double error = (ours[i].to(at::kDouble) - reference[i]).abs().max().item<double>();
    const double scale = reference[i].abs().max().item<double>();
    EXPECT_LE(error, 1e-5 * scale) << "result " << i << " differs by " << error << " of " << scale;
  }
}

TEST_F(DeterministicNorms, BatchNormOnOneByOneMapsIsThreadInvariantAndTorchsBatchNorm) {
  at::manual_seed(0);
  const at::Tensor input = at::randn({64, 512, 1, 1});
  ThreadInvariantBatchNorm2d bn(512);
  const auto one = forward_backward(bn, input, 1);
  expect_bitwise_equal(one, forward_backward(bn, input, 3));
  // Against torch's BatchNorm2d in float64, running statistics included (one training pass each).
  ThreadInvariantBatchNorm2d fresh(512);
  torch::nn::BatchNorm2d reference(512);
  reference->to(at::kDouble);
  expect_close(forward_backward(fresh, input, 1), forward_backward(reference, input.to(at::kDouble), 1));
  expect_close({fresh->running_mean, fresh->running_var}, {reference->running_mean, reference->running_var});
  EXPECT_EQ(fresh->num_batches_tracked.item<int64_t>(), 1);
}

TEST_F(DeterministicNorms, ChannelsLastBatchNormIsThreadInvariant) {
  at::manual_seed(1);
  const at::Tensor input = at::randn({16, 64, 6, 6}).contiguous(at::MemoryFormat::ChannelsLast);
  ThreadInvariantBatchNorm2d bn(64);
  const auto one = forward_backward(bn, input, 1);
  expect_bitwise_equal(one, forward_backward(bn, input, 3));
  torch::nn::BatchNorm2d reference(64);
  reference->to(at::kDouble);
  expect_close(one, forward_backward(reference, input.to(at::kDouble), 1));
}

TEST_F(DeterministicNorms, LayerNormIsThreadInvariantAndTorchsLayerNorm) {
  at::manual_seed(2);
  const at::Tensor input = at::randn({64, 33, 96});
  ThreadInvariantLayerNorm ln(torch::nn::LayerNormOptions({96}));
  {
    at::NoGradGuard no_grad;
    ln->weight.uniform_(0.5, 1.5);
    ln->bias.uniform_(-0.5, 0.5);
  }
  const auto one = forward_backward(ln, input, 1);
  expect_bitwise_equal(one, forward_backward(ln, input, 3));
  torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({96}));
  reference->to(at::kDouble);
  {
    at::NoGradGuard no_grad;
    reference->weight.copy_(ln->weight);
    reference->bias.copy_(ln->bias);
  }
  expect_close(one, forward_backward(reference, input.to(at::kDouble), 1));
}

TEST(ThreadInvariantNorms, AreTorchsKernelsWithoutDeterministicAlgorithms) {
  at::manual_seed(3);
  const at::Tensor input = at::randn({8, 32, 1, 1});
  ThreadInvariantBatchNorm2d bn(32);
  torch::nn::BatchNorm2d reference(32);
  const auto ours = forward_backward(bn, input, 1);
  expect_bitwise_equal(ours, forward_backward(reference, input, 1));
}

}  // namespace
