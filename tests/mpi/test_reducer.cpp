// The Reducer on 2 and 3 ranks: bucketed result = flat all-reduce reference, accumulation under
// no_sync (verified by counting collectives), unused parameters without hangs, compression within
// tolerance, cross-rank model mismatch, and buckets launched during backward.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim/adamw.h>

#include <tuple>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/error.hpp"

using namespace mnddp;
namespace nn = torch::nn;

namespace {

// Two-branch MLP: `head_b` is used only when asked, to make unused parameters.
struct TwoBranch : nn::Module {
  TwoBranch(int in, int hidden, int out) {
    trunk = register_module("trunk", nn::Linear(in, hidden));
    head_a = register_module("head_a", nn::Linear(hidden, out));
    head_b = register_module("head_b", nn::Linear(hidden, out));
  }
  at::Tensor forward(const at::Tensor& x, bool use_b) {
    auto h = torch::relu(trunk->forward(x));
    auto y = head_a->forward(h);
    return use_b ? y + head_b->forward(h) : y;
  }
  nn::Linear trunk{nullptr}, head_a{nullptr}, head_b{nullptr};
};

std::shared_ptr<TwoBranch> make_net(int hidden = 32) {
  torch::manual_seed(7);
  return std::make_shared<TwoBranch>(12, hidden, 5);
}

// Rank-specific data, the same on every run.
at::Tensor rank_input(int rank, std::int64_t batch, int salt = 0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 17 * rank + salt);
  return at::randn({batch, 12}, gen);
}

DdpOptions tiny_buckets(GradCompression compression = GradCompression::None, bool find_unused = false) {
  DdpOptions o;
  o.reducer.limits.first_cap_bytes = 256;
  o.reducer.limits.cap_bytes = 1024;
  o.reducer.compression = compression;
  o.reducer.find_unused_parameters = find_unused;
  return o;
}

std::vector<at::Tensor> grads_of(nn::Module& m) {
  std::vector<at::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  return out;
}

// One synchronised step; returns the local (pre-reduction) gradients, computed on an identical
// twin without DDP: with gradients as bucket views, reading them between backward and finalize()
// would race with the in-place all-reduce.
std::vector<at::Tensor> step(DistributedDataParallel& ddp, TwoBranch& net, const at::Tensor& x, bool use_b) {
  auto twin = make_net(static_cast<int>(net.trunk->weight.size(0)));
  {
    torch::NoGradGuard no_grad;
    const auto from = net.parameters();
    auto to = twin->parameters();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  twin->forward(x, use_b).pow(2).mean().backward();
  auto local = grads_of(*twin);

  ddp.zero_grad();
  auto loss = net.forward(x, use_b).pow(2).mean();
  ddp.prepare_for_backward(loss);
  loss.backward();
  ddp.finalize();
  return local;
}

double max_relative_error(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(b[i].abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

// The reference: one flat blocking all-reduce (average) of the local gradients.
std::vector<at::Tensor> flat_reference(Communicator& comm, const std::vector<at::Tensor>& local) {
  std::vector<at::Tensor> flat_parts;
  for (const auto& g : local) flat_parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  allreduce(comm, flat, ReduceOp::Avg);
  std::vector<at::Tensor> out;
  std::int64_t offset = 0;
  for (const auto& g : local) {
    out.push_back(flat.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
  return out;
}

}  // namespace

// Every case twice: across the ranks (World), and on each rank alone (Alone, MPI_COMM_SELF), where
// the reducer takes its one-rank path: nothing staged, reduced or copied back, the same outcomes.
class ReducerTest : public ::testing::TestWithParam<bool> {
 protected:
  bool alone() const { return GetParam(); }
  MpiComm comm{GetParam() ? MPI_COMM_SELF : MPI_COMM_WORLD};
};
INSTANTIATE_TEST_SUITE_P(, ReducerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Alone" : "World"; });

TEST_P(ReducerTest, BucketPlanIsReverseOrderWithSmallFirstBucket) {
  auto net = make_net(64);
  DistributedDataParallel ddp(net, comm, tiny_buckets());
  const auto& plan = ddp.reducer().bucket_members();
  ASSERT_GT(plan.size(), 2u);
  EXPECT_EQ(plan.front().front(), net->parameters().size() - 1) << "the last registered parameter goes first";
  EXPECT_EQ(plan.back().back(), 0u) << "the first registered parameter goes last";
}

TEST_P(ReducerTest, BucketedEqualsFlatAllreduce) {
  auto net = make_net();
  DistributedDataParallel ddp(net, comm, tiny_buckets());
  const auto local = step(ddp, *net, rank_input(comm.rank(), 16), true);
  EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), 1e-6);
  if (!alone())
    EXPECT_GT(ddp.reducer().last_stats().buckets_launched_in_backward, 0u)
        << "buckets must start during backward, not in finalize()";
}

TEST_P(ReducerTest, PrescaledLossEqualsAveraging) {
  auto averaged = make_net();
  DistributedDataParallel ddp_avg(averaged, comm, tiny_buckets());
  const at::Tensor x = rank_input(comm.rank(), 16);
  step(ddp_avg, *averaged, x, true);

  auto summed = make_net();
  DdpOptions options = tiny_buckets();
  options.reducer.loss_prescaled = true;
  DistributedDataParallel ddp_sum(summed, comm, options);
  auto loss = ddp_sum.scale_loss(summed->forward(x, true).pow(2).mean());
  ddp_sum.prepare_for_backward(loss);
  loss.backward();
  ddp_sum.finalize();
  EXPECT_LE(max_relative_error(grads_of(*summed), grads_of(*averaged)), 1e-6);
}

TEST_P(ReducerTest, DefaultBucketsEqualFlatAllreduce) {
  auto net = make_net();
  DistributedDataParallel ddp(net, comm);
  const auto local = step(ddp, *net, rank_input(comm.rank(), 16), true);
  EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), 1e-6);
}

TEST_P(ReducerTest, FourMicroStepsEqualOneStepOfFourTimesTheBatch) {
  const std::int64_t b = 8;
  const at::Tensor big = rank_input(comm.rank(), 4 * b);

  auto accumulated = make_net();
  DistributedDataParallel ddp_acc(accumulated, comm, tiny_buckets());
  const auto before = comm.collective_count();
  for (int micro = 0; micro < 4; ++micro) {
    std::optional<DistributedDataParallel::NoSync> local_only;
    if (micro < 3) local_only.emplace(ddp_acc.reducer());
    ddp_acc.before_forward();
    auto loss = accumulated->forward(big.narrow(0, micro * b, b), true).pow(2).mean() / 4;
    if (!local_only) ddp_acc.prepare_for_backward(loss);
    loss.backward();
    if (micro == 2) {
      EXPECT_EQ(comm.collective_count(), before) << "no_sync micro-steps must not communicate";
    }
    ddp_acc.finalize();
  }
  // Alone, the mean over ranks is the gradient itself: nothing is issued at all.
  const std::size_t issued = alone() ? 0 : ddp_acc.reducer().bucket_members().size();
  EXPECT_EQ(comm.collective_count() - before, issued) << "the boundary step issues exactly one all-reduce per bucket";

  auto whole = make_net();
  DistributedDataParallel ddp_whole(whole, comm, tiny_buckets());
  step(ddp_whole, *whole, big, true);
  EXPECT_LE(max_relative_error(grads_of(*accumulated), grads_of(*whole)), 1e-5);
}

TEST_P(ReducerTest, ParameterUnusedOnSomeRanksDoesNotHang) {
  for (bool find_unused : {false, true}) {
    auto net = make_net();
    DistributedDataParallel ddp(net, comm, tiny_buckets(GradCompression::None, find_unused));
    const bool use_b = comm.rank() % 2 == 1;  // rank 0 never touches head_b
    const auto local = step(ddp, *net, rank_input(comm.rank(), 16), use_b);
    // Unused gradients count as zeros in the average.
    EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), 1e-6) << "find_unused " << find_unused;
  }
}

// Without overlap (what --sync-batchnorm with --find-unused-parameters sets: SyncBatchNorm's collectives
// share the communicator, and a rank that used fewer parameters would complete a bucket at another
// point among them): no bucket starts during backward, and the result is the same.
TEST_P(ReducerTest, WithoutOverlapEveryBucketStartsInFinalize) {
  DdpOptions options = tiny_buckets(GradCompression::None, /*find_unused=*/true);
  options.reducer.overlap = false;
  auto net = make_net();
  DistributedDataParallel ddp(net, comm, options);
  const bool use_b = comm.rank() % 2 == 1;
  const auto local = step(ddp, *net, rank_input(comm.rank(), 16), use_b);
  EXPECT_EQ(ddp.reducer().last_stats().buckets_launched_in_backward, 0u);
  EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), 1e-6);
}

// As PyTorch: with find_unused_parameters, a parameter no rank used keeps no gradient, so the
// optimizer (AdamW's momentum and weight decay included) leaves it where it is.
TEST_P(ReducerTest, ParameterUnusedEverywhereKeepsNoGradientAndIsNotStepped) {
  auto net = make_net();
  DistributedDataParallel ddp(net, comm, tiny_buckets(GradCompression::None, true));
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  // Step 0 uses head_b everywhere (AdamW gets state for it); steps 1 and 2 use it nowhere.
  step(ddp, *net, rank_input(comm.rank(), 16), true);
  adamw.step();
  const at::Tensor after_use = net->head_b->weight.detach().clone();
  for (int s = 1; s <= 2; ++s) {
    step(ddp, *net, rank_input(comm.rank(), 16, s), false);
    EXPECT_FALSE(net->head_b->weight.grad().defined()) << "step " << s;
    EXPECT_TRUE(net->head_a->weight.grad().defined()) << "step " << s;
    adamw.step();
  }
  EXPECT_TRUE(at::equal(net->head_b->weight.detach(), after_use)) << "an unused parameter moved";
  if (!alone()) EXPECT_GT(ddp.reducer().last_stats().buckets_launched_in_backward, 0u);
  // Used again: it gets its gradient (and the bucket view) back.
  const auto local = step(ddp, *net, rank_input(comm.rank(), 16, 3), true);
  EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), 1e-6);
}

// Without find_unused_parameters mnddp differs from PyTorch on purpose: PyTorch stops with "expected
// to have finished reduction"; mnddp averages the missing gradient as zeros (and warns once).
TEST_P(ReducerTest, WithoutFindUnusedAParameterUnusedEverywhereAveragesZero) {
  auto net = make_net();
  DistributedDataParallel ddp(net, comm, tiny_buckets(GradCompression::None, false));
  step(ddp, *net, rank_input(comm.rank(), 16), false);
  ASSERT_TRUE(net->head_b->weight.grad().defined());
  EXPECT_EQ(net->head_b->weight.grad().abs().max().item<float>(), 0.0f);
}

// A parameter used only in a no_sync micro-step keeps what it accumulated there: the synchronised
// micro-step that skips it must reduce that, not zeros (PyTorch copies a defined gradient and
// zeroes only an undefined one).
TEST_P(ReducerTest, NoSyncAccumulationSurvivesASynchronisedStepThatSkipsTheParameter) {
  for (auto [compression, find_unused, tolerance] :
       {std::tuple{GradCompression::None, false, 1e-6}, std::tuple{GradCompression::None, true, 1e-6},
        std::tuple{GradCompression::BF16, false, 1e-2}, std::tuple{GradCompression::BF16, true, 1e-2}}) {
    auto net = make_net();
    DistributedDataParallel ddp(net, comm, tiny_buckets(compression, find_unused));
    const at::Tensor x0 = rank_input(comm.rank(), 8, 1);
    const at::Tensor x1 = rank_input(comm.rank(), 8, 2);
    // The same two micro-steps without DDP: the local accumulated gradients.
    auto twin = make_net();
    twin->forward(x0, true).pow(2).mean().backward();
    twin->forward(x1, false).pow(2).mean().backward();
    const auto local = grads_of(*twin);

    ddp.zero_grad();
    {
      DistributedDataParallel::NoSync local_only(ddp.reducer());
      ddp.before_forward();
      net->forward(x0, true).pow(2).mean().backward();  // head_b gets a gradient here only
    }
    ddp.before_forward();
    auto loss = net->forward(x1, false).pow(2).mean();
    ddp.prepare_for_backward(loss);
    loss.backward();
    ddp.finalize();
    ASSERT_TRUE(net->head_b->weight.grad().defined());
    EXPECT_GT(net->head_b->weight.grad().abs().max().item<float>(), 0.0f)
        << "the no_sync gradient of head_b was lost (compression " << static_cast<int>(compression) << ", find_unused "
        << find_unused << ")";
    EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), tolerance)
        << "compression " << static_cast<int>(compression) << ", find_unused " << find_unused;
  }
}

// Several synchronised steps in a row, with the parameters moving in between and the set of used
// parameters changing from step to step and from rank to rank: from the second step on the
// gradients are views into the buckets already, the path a single step never reaches.
TEST_P(ReducerTest, MultiStepSequencesMatchTheFlatReferenceEveryStep) {
  for (bool find_unused : {false, true}) {
    for (auto compression : {GradCompression::None, GradCompression::FP16}) {
      auto net = make_net();
      DistributedDataParallel ddp(net, comm, tiny_buckets(compression, find_unused));
      const double tolerance = compression == GradCompression::None ? 1e-6 : 2e-3;
      const bool uses_b[4][2] = {{true, true}, {false, true}, {false, false}, {true, false}};
      for (int s = 0; s < 4; ++s) {
        const bool use_b = uses_b[s][comm.rank() % 2];
        const auto local = step(ddp, *net, rank_input(comm.rank(), 16, 10 + s), use_b);
        const bool nobody = !uses_b[s][0] && !uses_b[s][1];
        if (find_unused && nobody) {
          EXPECT_FALSE(net->head_b->weight.grad().defined()) << "step " << s;
        }
        EXPECT_LE(max_relative_error(grads_of(*net), flat_reference(comm, local)), tolerance)
            << "step " << s << " find_unused " << find_unused << " compression " << static_cast<int>(compression);
        torch::NoGradGuard no_grad;
        for (auto& p : net->parameters())
          if (p.grad().defined()) p.sub_(p.grad() * 0.1);
      }
    }
  }
}

TEST_P(ReducerTest, CompressionWithinTolerance) {
  // Stated tolerances: bf16 keeps 8 mantissa bits (~4e-3 relative per value), fp16 keeps 11 (~5e-4).
  for (auto [compression, tolerance] :
       {std::pair{GradCompression::BF16, 1e-2}, std::pair{GradCompression::FP16, 2e-3}}) {
    auto net = make_net();
    DistributedDataParallel ddp(net, comm, tiny_buckets(compression));
    const auto local = step(ddp, *net, rank_input(comm.rank(), 16), true);
    const double error = max_relative_error(grads_of(*net), flat_reference(comm, local));
    EXPECT_LE(error, tolerance);
    EXPECT_GT(error, 0.0) << "compression should be visible in the result";
  }
}

TEST_P(ReducerTest, ModelMismatchNamesTheFirstDifferingParameter) {
  if (alone()) GTEST_SKIP() << "a mismatch needs two ranks";
  torch::manual_seed(1);
  auto net = std::make_shared<TwoBranch>(12, comm.rank() == 0 ? 32 : 33, 5);
  try {
    DistributedDataParallel ddp(net, comm);
    FAIL() << "a mismatch must throw on every rank";
  } catch (const Error& e) {
    EXPECT_TRUE(e.collective());
    EXPECT_NE(std::string(e.what()).find("trunk.weight"), std::string::npos) << e.what();
  }
}

TEST_P(ReducerTest, InitialBroadcastMakesReplicasIdentical) {
  torch::manual_seed(100 + comm.rank());  // different weights on every rank
  auto net = std::make_shared<TwoBranch>(12, 8, 5);
  DistributedDataParallel ddp(net, comm);
  for (auto& p : net->parameters()) {
    at::Tensor mine = p.detach().clone();
    at::Tensor root = mine.clone();
    broadcast(comm, root, 0);
    EXPECT_TRUE(at::equal(mine, root));
  }
}
