// The DDP equivalence test: N ranks x per-rank batch B for K steps must give the same parameters as
// 1 rank x batch N*B for K steps (within 1e-5 relative), every replica must be bitwise identical,
// and validation must count every sample exactly once.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/train/trainer.hpp"
#include "test_support.hpp"

using namespace mnddp;

namespace {

constexpr std::int64_t kValSamples = 101;  // not divisible by 2 or 3: no rank gets an equal share

// Rank 0 writes the dataset; every rank learns where.
std::string shared_dataset(Communicator& comm, const testing_support::TempDir& dir, std::vector<std::int64_t> shape) {
  std::string path = dir.file("data");
  if (comm.is_root()) {
    SynthOptions synth;
    synth.out_dir = path;
    synth.train_samples = 1536;
    synth.val_samples = kValSamples;
    synth.shards = 3;
    synth.shape = std::move(shape);
    synth.num_classes = 4;
    synth.noise = 3.0;
    write_synthetic_classification(synth);
  }
  broadcast_string(comm, path, 0);
  return path;
}

TrainingConfig small_run(const std::string& data, const std::string& model, const std::string& optimizer) {
  TrainingConfig c;
  c.train_data = data + "/train_*.h5";
  c.val_data = data + "/val_*.h5";
  c.model = parse_model_name(model);
  c.hidden = 16;
  c.layers = 2;
  c.num_classes = 4;
  c.optimizer = parse_choice_or_throw<OptimizerKind>(optimizer, "--optimizer");
  c.lr = c.optimizer == OptimizerKind::Sgd ? 0.05 : 0.002;
  c.weight_decay = 0.01;
  c.lr_schedule = LrSchedule::Cosine;
  c.warmup_steps = 3;
  c.max_steps = 12;
  c.epochs = 1;
  c.metrics_file = "";
  c.threads = 1;
  c.prefetch_batches = 2;
  c.log_interval = 100;
  // Tiny buckets: many all-reduces per step, started during backward.
  c.bucket_cap_mb = 0.002;
  c.first_bucket_mb = 0.001;
  return c;
}

// Largest |a - b| relative to the largest |b| of the tensor.
double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

void expect_equivalent(const std::string& model, const std::string& optimizer, std::vector<std::int64_t> shape,
                       bool batch_norm_free = true) {
  MpiComm world;
  testing_support::TempDir dir("mnddp-ddp-eq");
  const std::string data = shared_dataset(world, dir, std::move(shape));
  const int n = world.size();
  const RankInfo me{
      world.rank(), n, world.rank(), n, 1, 0, "test",
  };

  TrainingConfig distributed = small_run(data, model, optimizer);
  distributed.batch_size = 8;
  Trainer parallel(distributed, me, world);
  const TrainResult result = parallel.run();
  EXPECT_EQ(result.steps, 12);
  EXPECT_EQ(result.val_samples, kValSamples) << "validation must count every sample exactly once";

  // Every replica identical to rank 0's, bit for bit.
  for (auto p : parallel.parameters()) {
    at::Tensor mine = p.detach().clone();
    at::Tensor reference = mine.clone();
    broadcast(world, reference, 0);
    ASSERT_TRUE(at::equal(mine, reference)) << "replica on rank " << world.rank() << " differs from rank 0";
  }

  if (!batch_norm_free) return;
  // The same run on one rank with batch N*B, done by rank 0 on its own communicator.
  if (world.is_root()) {
    MpiComm alone(MPI_COMM_SELF);
    const RankInfo single{0, 1, 0, 1, 1, 0, "test"};
    TrainingConfig serial = small_run(data, model, optimizer);
    serial.batch_size = distributed.batch_size * n;
    Trainer reference(serial, single, alone);
    const TrainResult single_result = reference.run();
    EXPECT_EQ(single_result.val_samples, kValSamples);
    const auto a = parallel.parameters();
    const auto b = reference.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(relative_difference(a[i], b[i]), 1e-5) << "parameter " << i << " of " << model << "/" << optimizer;
  }
}

}  // namespace

TEST(DdpEquivalence, MlpWithSgdMomentum) { expect_equivalent("mlp", "sgd", {24}); }

TEST(DdpEquivalence, MlpWithAdamW) { expect_equivalent("mlp", "adamw", {24}); }

// BatchNorm statistics depend on the per-rank batch, so N x B cannot equal 1 x NB; replicas must
// still agree exactly (buffers are broadcast from rank 0).
TEST(DdpEquivalence, ConvNetReplicasStayIdentical) { expect_equivalent("convnet", "sgd", {1, 8, 8}, false); }
