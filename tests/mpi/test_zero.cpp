// ZeRO's pieces on 2 and 3 ranks, against the whole-model computations they replace: the kept
// gradient chunks of ZeRO-2 equal the matching range of the all-reduced gradients; the clipping
// norm equals torch's clip_grad_norm_ over the whole model; an overflow on one rank's piece skips
// the fp16 step on every rank; the optimizer state gathered from the pieces equals the whole-model
// optimizer's, and scattering it into a fresh partition continues the same trajectory.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <limits>
#include <map>

#include "mnddp/amp/loss_scaler.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/zero/zero_partition.hpp"

using namespace mnddp;
namespace nn = torch::nn;

namespace {

// 12 -> 37 -> 5: 481 + 190 values, which no world size here divides evenly.
std::shared_ptr<nn::SequentialImpl> make_net() {
  torch::manual_seed(7);
  return std::make_shared<nn::SequentialImpl>(nn::Linear(12, 37), nn::Tanh(), nn::Linear(37, 5));
}

at::Tensor rank_input(int rank, std::int64_t features = 12) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 17 * rank);
  return at::randn({16, features}, gen);
}

DdpOptions tiny_buckets(bool shard_gradients) {
  DdpOptions o;
  o.reducer.limits.first_cap_bytes = 256;
  o.reducer.limits.cap_bytes = 1024;
  o.reducer.shard_gradients = shard_gradients;
  return o;
}

void backward(DistributedDataParallel& ddp, nn::SequentialImpl& net, int rank, double scale = 1.0) {
  ddp.zero_grad();
  const auto features = net.parameters().front().size(1);
  const auto dtype = net.parameters().front().scalar_type();
  const at::Tensor loss = net.forward(rank_input(rank, features).to(dtype)).pow(2).mean() * scale;
  ddp.prepare_for_backward(loss);
  loss.backward();
  ddp.finalize();
}

TrainingConfig adamw() {
  TrainingConfig config;
  config.optimizer = OptimizerKind::AdamW;
  config.lr = 0.01;
  config.weight_decay = 0.1;
  return config;
}

// A model with DDP and, for ZeRO, its partition and an optimizer over the pieces.
struct Replica {
  Replica(Communicator& comm, int stage, TrainingConfig config = adamw(),
          std::shared_ptr<nn::SequentialImpl> model = make_net())
      : net(std::move(model)), ddp(net, comm, tiny_buckets(stage >= 2)) {
    if (stage == 0) {
      optimizer = make_optimizer(config, net->named_parameters());
      return;
    }
    zero = std::make_unique<ZeroPartition>(stage, ddp.reducer(), comm);
    optimizer = make_optimizer(config, zero->parameter_groups(effective_no_decay_norm_bias(config)));
    zero->attach(*optimizer);
  }
  void step(int rank) {
    backward(ddp, *net, rank);
    if (zero) zero->bind_gradients();
    optimizer->step();
    if (zero) zero->all_gather_parameters();
  }
  std::shared_ptr<nn::SequentialImpl> net;
  DistributedDataParallel ddp;
  std::unique_ptr<ZeroPartition> zero;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

}  // namespace

class ZeroTest : public ::testing::Test {
 protected:
  MpiComm comm;
};

TEST_F(ZeroTest, KeptGradientChunksAreTheAllReducedGradients) {
  Replica whole(comm, 0), sharded(comm, 2);
  backward(whole.ddp, *whole.net, comm.rank());
  backward(sharded.ddp, *sharded.net, comm.rank());
  const Reducer& reducer = sharded.ddp.reducer();
  const ShardLayout& layout = sharded.zero->layout();
  ASSERT_GT(layout.bucket_count(), 1u);
  std::int64_t compared = 0;
  for (const ShardPiece& piece : layout.pieces(comm.rank())) {
    const at::Tensor expected =
        whole.ddp.reducer().parameters()[piece.param].grad().reshape({-1}).narrow(0, piece.param_offset, piece.length);
    const at::Tensor kept = reducer.shards()->gradient(piece.bucket).narrow(0, piece.chunk_offset, piece.length);
    EXPECT_TRUE(at::allclose(kept, expected, 1e-6, 1e-7)) << "piece of parameter " << piece.param;
    compared += piece.length;
  }
  EXPECT_EQ(compared, layout.owned_elements(comm.rank()));
  for (const auto& p : reducer.parameters()) EXPECT_FALSE(p.grad().defined()) << "ZeRO-2 keeps no full gradient";
}

TEST_F(ZeroTest, ClippingNormIsTheWholeModels) {
  for (int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    Replica whole(comm, 0), sharded(comm, stage);
    backward(whole.ddp, *whole.net, comm.rank(), 100.0);
    backward(sharded.ddp, *sharded.net, comm.rank(), 100.0);
    torch::nn::utils::clip_grad_norm_(whole.net->parameters(), 0.5);
    const auto& pieces = sharded.zero->bind_gradients();
    sharded.zero->clip_grad_norm(0.5);
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      const ShardPiece piece = sharded.zero->layout().pieces(comm.rank())[k];
      const at::Tensor expected =
          whole.net->parameters()[piece.param].grad().reshape({-1}).narrow(0, piece.param_offset, piece.length);
      EXPECT_TRUE(at::allclose(pieces[k].grad(), expected, 1e-5, 1e-8)) << "piece " << k;
    }
  }
}

TEST_F(ZeroTest, AnOverflowOnOneRanksPieceSkipsTheStepEverywhere) {
  Replica sharded(comm, 2);
  backward(sharded.ddp, *sharded.net, comm.rank());
  const auto& pieces = sharded.zero->bind_gradients();
  if (comm.rank() == comm.size() - 1) {
    ASSERT_FALSE(pieces.empty());
    pieces.back().grad().fill_(std::numeric_limits<float>::infinity());
  }
  LossScaler scaler(LossScalerOptions{true}, at::kCPU);
  EXPECT_FALSE(scaler.unscale(pieces, &comm)) << "every rank must skip the step";
  EXPECT_FALSE(sharded.zero->gradients_finite());
}

TEST_F(ZeroTest, GatheredStateIsTheWholeOptimizersAndScatteringItContinuesTheRun) {
  Replica whole(comm, 0), sharded(comm, 2);
  for (int i = 0; i < 3; ++i) {
    whole.step(comm.rank());
    sharded.step(comm.rank());
  }
  const auto arrays = sharded.zero->gather_state(OptimizerKind::AdamW);
  std::map<std::string, at::Tensor> by_name(arrays.begin(), arrays.end());
  std::size_t checked = 0;
  for (const auto& item : whole.net->named_parameters()) {
    const auto& state = static_cast<const torch::optim::AdamWParamState&>(
        *whole.optimizer->state().at(item.value().unsafeGetTensorImpl()));
    // Equal up to the order of the gradients' sums (a reduce-scatter against an all-reduce on 3 ranks).
    EXPECT_TRUE(at::allclose(by_name.at("optimizer/" + item.key() + "/exp_avg"), state.exp_avg(), 1e-5, 1e-12))
        << item.key();
    EXPECT_TRUE(at::allclose(by_name.at("optimizer/" + item.key() + "/exp_avg_sq"), state.exp_avg_sq(), 1e-5, 1e-12))
        << item.key();
    EXPECT_EQ(by_name.at("optimizer/" + item.key() + "/step").item<std::int64_t>(), 3);
    checked += 3;
  }
  EXPECT_EQ(checked, arrays.size());

  // A fresh ZeRO-1 replica given the parameters and the state goes on exactly as the original.
  Replica resumed(comm, 1);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < resumed.net->parameters().size(); ++i)
      resumed.net->parameters()[i].copy_(sharded.net->parameters()[i]);
  }
  resumed.zero->scatter_state(OptimizerKind::AdamW, [&](const std::string& name) -> std::optional<at::Tensor> {
    const auto found = by_name.find(name);
    return found == by_name.end() ? std::nullopt : std::optional<at::Tensor>(found->second);
  });
  sharded.step(comm.rank());
  resumed.step(comm.rank());
  for (std::size_t i = 0; i < resumed.net->parameters().size(); ++i)
    EXPECT_TRUE(at::equal(resumed.net->parameters()[i], sharded.net->parameters()[i])) << "parameter " << i;
}

// LAMB's trust ratios are collective under ZeRO, group by group. A model of 6 values fits in rank 0's
// first 32-value chunk, so every other rank owns no piece at all: it must still join each group's
// norms (or rank 0 waits in them while the others go on to the all-gather).
TEST_F(ZeroTest, LambWithRanksThatOwnNothingStepsLikeTheWholeOptimizer) {
  auto tiny = [] {
    torch::manual_seed(11);
    return std::make_shared<nn::SequentialImpl>(nn::Linear(2, 2));
  };
  TrainingConfig lamb = adamw();
  lamb.optimizer = OptimizerKind::Lamb;
  lamb.weight_decay = 0.01;
  Replica whole(comm, 0, lamb, tiny()), sharded(comm, 2, lamb, tiny());
  ASSERT_EQ(sharded.zero->layout().owned_elements(comm.size() - 1), 0) << "the last rank must own nothing";
  for (int i = 0; i < 2; ++i) {
    whole.step(comm.rank());
    sharded.step(comm.rank());
  }
  for (std::size_t i = 0; i < whole.net->parameters().size(); ++i)
    EXPECT_TRUE(at::allclose(sharded.net->parameters()[i], whole.net->parameters()[i], 1e-5, 1e-7)) << i;
}

// The trust ratios of LAMB and LARS take whole-parameter norms summed across pieces in float32;
// a float64 parameter's pieces join them (a TorchScript model may hold one), on stage 1 and 2.
TEST_F(ZeroTest, TrustRatiosOfFloat64ParametersAreTheWholeOptimizers) {
  auto float64_net = [] {
    auto net = make_net();
    net->to(torch::kFloat64);
    return net;
  };
  for (const auto kind : {OptimizerKind::Lamb, OptimizerKind::Lars}) {
    TrainingConfig config = adamw();
    config.optimizer = kind;
    for (const int stage : {1, 2}) {
      Replica whole(comm, 0, config, float64_net()), sharded(comm, stage, config, float64_net());
      for (int i = 0; i < 2; ++i) {
        whole.step(comm.rank());
        sharded.step(comm.rank());
      }
      for (std::size_t i = 0; i < whole.net->parameters().size(); ++i)
        EXPECT_TRUE(at::allclose(sharded.net->parameters()[i], whole.net->parameters()[i], 1e-5, 1e-7))
            << "stage " << stage << ", parameter " << i;
    }
  }
}
