// SyncBatchNorm2d on 2 and 3 ranks against torch's BatchNorm2d on the whole batch: each rank holds a
// slice of one fixed global batch, and its slice of the output and input gradient, the summed
// weight and bias gradients and the running statistics must equal those of one BatchNorm over the
// concatenated batch (the math of torch.nn.SyncBatchNorm), for even and uneven splits and a rank
// with no samples. Eval mode communicates nothing; one rank is plain BatchNorm bit for bit.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

#include <numeric>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/model/sync_batch_norm.hpp"

using namespace mnddp;
namespace nn = torch::nn;

namespace {

constexpr std::int64_t kChannels = 3;
constexpr double kTolerance = 1e-5;  // relative, float32

// Largest |a - b| relative to the largest |b|.
double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

// The same on every rank: a global batch [G, C, 5, 4] far from zero mean (so a variance computed as
// E[x^2] - mean^2 would lose digits), the affine parameters, and the output weights of the loss.
struct Problem {
  at::Tensor x, weight, bias, loss_weights;
};

Problem make_problem(std::int64_t global_batch) {
  torch::manual_seed(11);
  Problem p;
  p.x = at::randn({global_batch, kChannels, 5, 4}) * 2.5 + 7.0;
  p.weight = at::rand({kChannels}) + 0.5;
  p.bias = at::randn({kChannels});
  p.loss_weights = at::randn({global_batch, kChannels, 5, 4});
  return p;
}

struct Result {
  at::Tensor output, grad_input, grad_weight, grad_bias, running_mean, running_var, batches;
};

// `steps` forward and backward passes of `bn` (training mode) on x, with loss sum(y * loss_weights).
template <typename Layer>
Result train_layer(Layer& bn, const Problem& p, const at::Tensor& x_rows, const at::Tensor& weights_rows, int steps) {
  {
    torch::NoGradGuard no_grad;
    bn->weight.copy_(p.weight);
    bn->bias.copy_(p.bias);
  }
  bn->train();
  Result r;
  for (int s = 0; s < steps; ++s) {
    bn->weight.mutable_grad() = at::Tensor();
    bn->bias.mutable_grad() = at::Tensor();
    at::Tensor x = (x_rows * (1.0 + 0.25 * s)).detach().requires_grad_(true);  // each step its own batch
    at::Tensor y = bn->forward(x);
    (y * weights_rows).sum().backward();
    r.output = y.detach();
    r.grad_input = x.grad();
  }
  r.grad_weight = bn->weight.grad().clone();
  r.grad_bias = bn->bias.grad().clone();
  r.running_mean = bn->running_mean.clone();
  r.running_var = bn->running_var.clone();
  r.batches = bn->num_batches_tracked.clone();
  return r;
}

// Rank r's rows of the global batch: [offset, offset + sizes[r]).
void expect_matches_whole_batch(const std::vector<std::int64_t>& sizes, int steps = 2) {
  MpiComm world;
  ASSERT_EQ(static_cast<int>(sizes.size()), world.size());
  const std::int64_t global = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  const std::int64_t offset = std::accumulate(sizes.begin(), sizes.begin() + world.rank(), std::int64_t{0});
  const std::int64_t mine = sizes[static_cast<std::size_t>(world.rank())];
  const Problem p = make_problem(global);

  nn::BatchNorm2d reference(kChannels);
  const Result whole = train_layer(reference, p, p.x, p.loss_weights, steps);

  SyncBatchNorm2d sync(kChannels);
  ASSERT_EQ(bind_sync_batch_norm(*sync, &world), 1);
  Result part = train_layer(sync, p, p.x.narrow(0, offset, mine), p.loss_weights.narrow(0, offset, mine), steps);

  if (mine > 0) {
    EXPECT_LE(relative_difference(part.output, whole.output.narrow(0, offset, mine)), kTolerance) << "output";
    EXPECT_LE(relative_difference(part.grad_input, whole.grad_input.narrow(0, offset, mine)), kTolerance)
        << "input gradient";
  }
  // Each rank's weight and bias gradients are its share; DDP sums them, as here.
  allreduce(world, part.grad_weight, ReduceOp::Sum);
  allreduce(world, part.grad_bias, ReduceOp::Sum);
  EXPECT_LE(relative_difference(part.grad_weight, whole.grad_weight), kTolerance) << "weight gradient";
  EXPECT_LE(relative_difference(part.grad_bias, whole.grad_bias), kTolerance) << "bias gradient";
  EXPECT_LE(relative_difference(part.running_mean, whole.running_mean), kTolerance) << "running mean";
  EXPECT_LE(relative_difference(part.running_var, whole.running_var), kTolerance) << "running var (unbiased)";
  EXPECT_EQ(part.batches.item<std::int64_t>(), steps);
}

}  // namespace

TEST(SyncBatchNorm, EvenSplitEqualsBatchNormOnTheWholeBatch) {
  MpiComm world;
  expect_matches_whole_batch(std::vector<std::int64_t>(static_cast<std::size_t>(world.size()), 4));
}

// Rank r holds 2r + 1 samples: the counts weigh each rank's statistics.
TEST(SyncBatchNorm, UnevenSplitEqualsBatchNormOnTheWholeBatch) {
  MpiComm world;
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < world.size(); ++r) sizes.push_back(2 * r + 1);
  expect_matches_whole_batch(sizes);
}

// A rank with an empty batch still takes part in every collective and contributes nothing.
TEST(SyncBatchNorm, ARankWithNoSamplesTakesPart) {
  MpiComm world;
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(world.size()), 3);
  sizes[0] = 0;
  expect_matches_whole_batch(sizes);
}

// momentum None: the cumulative average over num_batches_tracked, as torch's BatchNorm.
TEST(SyncBatchNorm, CumulativeAverageWithoutMomentum) {
  MpiComm world;
  const Problem p = make_problem(2 * world.size());
  nn::BatchNorm2d reference(nn::BatchNorm2dOptions(kChannels).momentum(std::nullopt));
  const Result whole = train_layer(reference, p, p.x, p.loss_weights, 3);
  SyncBatchNorm2d sync(nn::BatchNorm2dOptions(kChannels).momentum(std::nullopt));
  sync->set_communicator(&world);
  const Result part =
      train_layer(sync, p, p.x.narrow(0, 2 * world.rank(), 2), p.loss_weights.narrow(0, 2 * world.rank(), 2), 3);
  EXPECT_LE(relative_difference(part.running_mean, whole.running_mean), kTolerance);
  EXPECT_LE(relative_difference(part.running_var, whole.running_var), kTolerance);
}

// Eval mode normalises with the running statistics and issues no collective (validation may run a
// different number of batches per rank).
TEST(SyncBatchNorm, EvalModeIsPlainBatchNormAndSilent) {
  MpiComm world;
  const Problem p = make_problem(4 * world.size());
  SyncBatchNorm2d sync(kChannels);
  sync->set_communicator(&world);
  train_layer(sync, p, p.x.narrow(0, 4 * world.rank(), 4), p.loss_weights.narrow(0, 4 * world.rank(), 4), 1);
  nn::BatchNorm2d plain(kChannels);
  {
    torch::NoGradGuard no_grad;
    for (const auto& item : sync->named_parameters()) plain->named_parameters()[item.key()].copy_(item.value());
    for (const auto& item : sync->named_buffers()) plain->named_buffers()[item.key()].copy_(item.value());
  }
  sync->eval();
  plain->eval();
  const std::uint64_t before = world.collective_count();
  const at::Tensor rows = p.x.narrow(0, 0, 1 + world.rank());  // a different batch size per rank
  const at::Tensor out = sync->forward(rows);
  EXPECT_EQ(world.collective_count(), before) << "eval mode must not communicate";
  EXPECT_TRUE(at::equal(out, plain->forward(rows)));
}

// On one rank SyncBatchNorm2d is BatchNorm2d: the same numbers bit for bit, no collectives.
TEST(SyncBatchNorm, OneRankIsBatchNormExactly) {
  MpiComm alone(MPI_COMM_SELF);
  const Problem p = make_problem(6);
  nn::BatchNorm2d reference(kChannels);
  const Result whole = train_layer(reference, p, p.x, p.loss_weights, 2);
  SyncBatchNorm2d sync(kChannels);
  sync->set_communicator(&alone);
  const std::uint64_t before = alone.collective_count();
  const Result part = train_layer(sync, p, p.x, p.loss_weights, 2);
  EXPECT_EQ(alone.collective_count(), before);
  EXPECT_TRUE(at::equal(part.output, whole.output));
  EXPECT_TRUE(at::equal(part.grad_input, whole.grad_input));
  EXPECT_TRUE(at::equal(part.running_var, whole.running_var));
}

TEST(SyncBatchNorm, TrainingWithoutACommunicatorThrows) {
  SyncBatchNorm2d sync(kChannels);
  sync->train();
  EXPECT_THROW(sync->forward(at::ones({2, kChannels, 2, 2})), std::logic_error);
  sync->eval();
  EXPECT_NO_THROW(sync->forward(at::ones({2, kChannels, 2, 2})));
}

// --sync-batchnorm swaps the layers of resnet and convnet and nothing else: the state names (and so
// checkpoints, exports, load_checkpoint.py) stay torchvision's.
TEST(SyncBatchNorm, ModelsKeepTheirStateNames) {
  MpiComm world;
  for (ModelKind kind : {ModelKind::Resnet18, ModelKind::ConvNet}) {
    ModelSpec spec;
    spec.kind = kind;
    spec.input_shape = {3, 8, 8};
    spec.hidden = 8;
    spec.num_outputs = 4;
    const auto plain = make_model(spec);
    spec.sync_batch_norm = true;
    const auto synced = make_model(spec);
    EXPECT_EQ(plain->named_parameters().keys(), synced->named_parameters().keys());
    EXPECT_EQ(plain->named_buffers().keys(), synced->named_buffers().keys());
    EXPECT_EQ(bind_sync_batch_norm(*plain, &world), 0);
    EXPECT_EQ(bind_sync_batch_norm(*synced, &world), kind == ModelKind::Resnet18 ? 20 : 2);
  }
}
