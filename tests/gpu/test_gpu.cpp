// GPU tests, run under 2 MPI ranks sharing whatever GPUs the machine has; skipped visibly without a
// GPU; with NCCL_CHECK_POINTERS=1 (ctest), so NCCL refuses a host pointer. NCCL in a world of one per
// rank: bootstrap, stream order against a slow producer, all-reduce in fp32/bf16/fp16, bf16
// compression (tests/gpu/test_nccl_pair.cpp takes two ranks). MPI: the Reducer and ZeRO on CUDA
// tensors with host staging across both ranks. AMP: bf16 autocast on CUDA.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "gpu_test_support.hpp"
#include "mnddp/build_config.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/nccl_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/device_binding.hpp"
#include "mnddp/model/sample_randomness.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/train/device_batch.hpp"
#include "mnddp/train/trainer.hpp"
#include "mnddp/zero/zero_partition.hpp"
#include "test_support.hpp"

#if MNDDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if MNDDP_HAVE_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

using namespace mnddp;
using namespace mnddp::gpu_tests;

namespace {}  // namespace

#if MNDDP_HAVE_NCCL
namespace {

// Makes `stream` wait for the work queued so far on the current stream of its device.
void after_current_stream(const c10::cuda::CUDAStream& stream) {
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(stream.device_index()));
  ready.block(stream);
}

}  // namespace
#endif

#if MNDDP_HAVE_NCCL
// In a world of one a sum is the identity, so a wrong stream order would still pass: make the
// producer slow (a sleep kernel, then the fill) on a stream of its own and read the result on a
// third stream after waiting only for the all-reduce. Without the fence that orders the NCCL stream
// after the producer, NCCL finishes first and the consumer reads the buffer before the fill.
TEST(Nccl, AllreduceIsOrderedAfterItsProducerStreamAndBeforeItsConsumer) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  NcclComm nccl(self, my_gpu().index(), 60.0);
  c10::cuda::CUDAGuard guard(my_gpu());
  auto producer = c10::cuda::getStreamFromPool(false, my_gpu().index());
  auto consumer = c10::cuda::getStreamFromPool(false, my_gpu().index());
  at::Tensor buffer = at::zeros({1 << 20}, at::TensorOptions().device(my_gpu()));
  after_current_stream(producer);  // the zeros come first
  at::Tensor seen;
  for (int round = 0; round < 3; ++round) {
    {
      c10::cuda::CUDAStreamGuard on(producer);
      at::cuda::sleep(200'000'000);  // ~0.1 s on an H200: far longer than the all-reduce
      buffer.fill_(3.0f + round);
    }
    auto work = allreduce_async(nccl, buffer, ReduceOp::Sum, CudaStream{producer.stream()});
    work->wait_on(CudaStream{consumer.stream()});
    {
      c10::cuda::CUDAStreamGuard on(consumer);
      seen = (buffer * 2.0f).to(at::kCPU, /*non_blocking=*/false);
    }
    EXPECT_TRUE(at::all(seen == 2.0f * (3.0f + round)).item<bool>())
        << "round " << round << ": read " << seen.min().item<float>();
  }
}

// Compression makes the reducer's result differ from the local gradient even in a world of one:
// the bf16 wire rounds it. Checks pointers, dtypes and the copy back on the device.
TEST(Nccl, ReducerWithBf16CompressionRoundsLikeTorch) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  NcclComm nccl(self, my_gpu().index(), 60.0);
  auto net = make_mlp(my_gpu());
  DdpOptions options;
  options.reducer.compression = GradCompression::BF16;
  DistributedDataParallel ddp(net.ptr(), self, nccl, options);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(50);
  at::Tensor x = at::randn({32, 64}, gen).to(my_gpu());
  auto twin = make_mlp(my_gpu());
  twin->forward(x).pow(2).mean().backward();
  at::Tensor loss = net->forward(x).pow(2).mean();
  ddp.prepare_for_backward(loss);
  loss.backward();
  ddp.finalize();
  const auto params = net->parameters();
  const auto reference = twin->parameters();
  double largest_change = 0.0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor expected = reference[i].grad().to(at::kBFloat16).to(at::kFloat).to(at::kCPU);
    const at::Tensor got = params[i].grad().to(at::kCPU);
    EXPECT_TRUE(at::equal(got, expected)) << "parameter " << i;
    largest_change = std::max(largest_change, (reference[i].grad().to(at::kCPU) - got).abs().max().item<double>());
  }
  EXPECT_GT(largest_change, 0.0) << "the bf16 wire changed nothing: compression did not happen";
}

TEST(Nccl, BootstrapWorldOfOneAndAllreduceEveryDtype) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  NcclComm nccl(self, my_gpu().index(), 60.0);
  EXPECT_EQ(nccl.size(), 1);
  for (auto type : {at::kFloat, at::kBFloat16, at::kHalf}) {
    at::Tensor t = at::arange(1000, at::TensorOptions().dtype(at::kFloat).device(my_gpu())).to(type);
    at::Tensor expected = t.clone();
    allreduce(nccl, t, ReduceOp::Sum);
    EXPECT_TRUE(at::equal(t, expected)) << c10::toString(type);
    allreduce(nccl, t, ReduceOp::Avg);
    EXPECT_TRUE(at::equal(t, expected)) << c10::toString(type);
  }
  EXPECT_NO_THROW(nccl.barrier());
}

// A result that differs from the input, against a CPU reference, in every dtype: a pre-scale on the
// producer stream (so the fence matters), then Max against a second buffer's values and Sum.
TEST(Nccl, PrescaledAllreduceInEveryDtypeMatchesACpuReference) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  NcclComm nccl(self, my_gpu().index(), 60.0);
  c10::cuda::CUDAGuard guard(my_gpu());
  auto producer = c10::cuda::getStreamFromPool(false, my_gpu().index());
  for (auto type : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor host = at::arange(4096, at::kFloat).mul_(0.37f).sub_(700.0f);
    at::Tensor t = host.to(my_gpu()).to(type);
    after_current_stream(producer);  // t is written on the current stream
    {
      c10::cuda::CUDAStreamGuard on(producer);
      at::cuda::sleep(50'000'000);
      t.mul_(0.25);  // the pre-scale: queued behind the sleep
    }
    allreduce_async(nccl, t, ReduceOp::Sum, CudaStream{producer.stream()})->wait();
    const at::Tensor expected = host.to(type).mul_(0.25);  // the same rounding, on the CPU
    EXPECT_TRUE(at::equal(t.to(at::kCPU), expected)) << c10::toString(type) << ": the pre-scale was not seen";
    at::Tensor m = t.clone();
    allreduce(nccl, m, ReduceOp::Max);
    EXPECT_TRUE(at::equal(m.to(at::kCPU), expected)) << c10::toString(type);
  }
}

// Batches go to the GPU through pinned memory with an asynchronous copy: the data arrives intact,
// and the copy overlaps a kernel already running on another stream (the timing is printed).
TEST(Batches, PinnedAsyncCopyIsCorrectAndOverlapsCompute) {
  MNDDP_REQUIRE_GPU();
  c10::cuda::CUDAGuard guard(my_gpu());
  HostBatch batch;
  batch.size = 512;
  batch.shape = {512, 3, 64, 64};
  batch.x.resize(static_cast<std::size_t>(512 * 3 * 64 * 64));
  batch.y.resize(512);
  for (std::size_t i = 0; i < batch.x.size(); ++i) batch.x[i] = static_cast<float>(i % 1000) * 0.5f;
  for (std::size_t i = 0; i < batch.y.size(); ++i) batch.y[i] = static_cast<std::int64_t>(i % 10);
  const DeviceBatch on_gpu = to_device(batch, my_gpu());
  const at::Tensor x_back = on_gpu.x.to(at::kCPU);
  EXPECT_TRUE(at::equal(x_back, at::from_blob(batch.x.data(), batch.shape, at::kFloat)));
  EXPECT_TRUE(at::equal(on_gpu.y.to(at::kCPU), at::from_blob(batch.y.data(), {512}, at::kLong)));

  // A 20 ms kernel on one stream and the copy on the current one: overlapped, the pair takes about
  // the longer of the two, not their sum.
  auto compute = c10::cuda::getStreamFromPool(false, my_gpu().index());
  auto timed = [&](bool overlap) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    {
      c10::cuda::CUDAStreamGuard on(compute);
      at::cuda::sleep(40'000'000);
    }
    if (!overlap) compute.synchronize();
    const DeviceBatch copied = to_device(batch, my_gpu());
    torch::cuda::synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // The ranks take turns (the other waits at a barrier, its GPU idle): two ranks timing at once on
  // one GPU would time-slice each other's kernels, and the comparison would be noise.
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double together = 0.0;
  double apart = 0.0;
  for (int turn = 0; turn < size; ++turn) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (turn != rank) continue;
    timed(true);  // warm-up: pinned pools, contexts
    together = timed(true);
    apart = timed(false);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("pinned batch of %.0f MB: copy beside a kernel %.1f ms, after it %.1f ms\n",
              static_cast<double>(batch.x.size() * 4) / 1e6, together * 1e3, apart * 1e3);
  EXPECT_LT(together, apart) << "the copy did not overlap the kernel";
}

#endif

TEST(MpiStaged, ReducerOnCudaTensorsAcrossRanksMatchesCpu) {
  MNDDP_REQUIRE_GPU();
  MpiComm world;
  const auto on_gpu = reduced_grads(world, world, my_gpu(), world.rank());
  const auto on_cpu = reduced_grads(world, world, at::Device(at::kCPU), world.rank());
  for (std::size_t i = 0; i < on_gpu.size(); ++i)
    EXPECT_TRUE(at::allclose(on_gpu[i], on_cpu[i], 1e-4, 1e-6)) << "parameter " << i;
}

#if MNDDP_HAVE_NCCL
// Every thread that touches CUDA binds the rank's device first (device_binding.hpp): a thread that
// did not would work on device 0, opening a context there on every rank of the node.
TEST(DeviceBinding, AThreadBindsTheRanksDeviceNotDeviceZero) {
  MNDDP_REQUIRE_GPU();
  const int count = static_cast<int>(torch::cuda::device_count());
  const int mine = count - 1;  // the last device, so that "device 0 by default" shows when there are two
  set_rank_device(mine);
  int seen = -1;
  std::thread worker([&] {
    bind_rank_device();
    cudaGetDevice(&seen);
  });
  worker.join();
  EXPECT_EQ(seen, mine);
  set_rank_device(my_gpu().index());
}

// Whole training runs on the GPU, each rank alone (NCCL refuses two ranks on one GPU): bf16 autocast,
// and fp16 with the dynamic loss scaler. The loss must stay finite and go down over 20 steps.
TEST(Training, Bf16AndFp16WithTheLossScalerLowerTheLoss) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  testing_support::TempDir dir("mnddp-gpu-train");
  SynthOptions synth;
  synth.out_dir = dir.file("data");
  synth.train_samples = 2048;
  synth.val_samples = 256;
  synth.shards = 2;
  synth.shape = {3, 16, 16};
  synth.num_classes = 4;
  write_synthetic_classification(synth);
  for (Amp amp : {Amp::BF16, Amp::FP16}) {
    TrainingConfig c;
    c.train_data = synth.out_dir + "/train_*.h5";
    c.val_data = synth.out_dir + "/val_*.h5";
    c.model = ModelKind::ConvNet;
    c.hidden = 16;
    c.num_classes = 4;
    c.batch_size = 64;
    c.max_steps = 20;
    c.log_interval = 10;
    c.amp = amp;
    c.device = DeviceRequest::Cuda;
    c.backend = Backend::Nccl;
    c.metrics_file = dir.file(std::string("metrics-") + std::string(choice_name(amp)) + ".jsonl");
    c.threads = 2;
    const RankInfo alone{0, 1, 0, 1, 1, 0, "gpu-test"};
    Trainer trainer(c, alone, self);
    EXPECT_EQ(trainer.backend(), "nccl");
    const TrainResult result = trainer.run();
    EXPECT_EQ(result.steps, 20);
    std::ifstream metrics(c.metrics_file);
    std::vector<double> losses;
    for (std::string line; std::getline(metrics, line);) {
      const auto at = line.find("\"kind\":\"train\"");
      const auto loss = line.find("\"loss\":");
      if (at != std::string::npos && loss != std::string::npos) losses.push_back(std::stod(line.substr(loss + 7)));
    }
    ASSERT_EQ(losses.size(), 2u) << choice_name(amp);
    EXPECT_TRUE(std::isfinite(losses[0]) && std::isfinite(losses[1])) << choice_name(amp);
    EXPECT_LT(losses[1], losses[0]) << choice_name(amp) << ": the loss did not go down";
    EXPECT_GT(result.peak_gpu_mib, 0.0);
  }
}

#endif  // MNDDP_HAVE_NCCL

TEST(Amp, Bf16AutocastOnCuda) {
  MNDDP_REQUIRE_GPU();
  auto net = make_mlp(my_gpu());
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::Tensor y = net->forward(at::randn({8, 64}, at::TensorOptions().device(my_gpu())));
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  y.to(at::kFloat).sum().backward();
  for (auto& p : net->parameters()) EXPECT_EQ(p.grad().scalar_type(), at::kFloat);
}

namespace {

// The dropout hash is integer tensor ops: the GPU must draw exactly the CPU's masks (a resumed run on
// other hardware draws the same), channels-last included.
TEST(SampleDropout, CudaMasksAreBitIdenticalToTheCpus) {
  MNDDP_REQUIRE_GPU();
  for (const double p : {0.1, 0.5}) {
    SampleRandomness randomness;
    randomness.add_layer();
    randomness.add_layer();
    std::vector<std::int64_t> ids(40);
    for (std::int64_t i = 0; i < 40; ++i) ids[i] = i * 1000003;
    randomness.set_batch(11, 5, ids);
    const at::Tensor cpu = at::empty({40, 3, 33, 17});  // two blocks of rows on the CPU, one on the GPU
    const at::Tensor cuda = cpu.to(at::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
    for (int layer = 0; layer < 2; ++layer)
      EXPECT_TRUE(at::equal(randomness.keep_mask(layer, cuda, p).cpu(), randomness.keep_mask(layer, cpu, p)))
          << "layer " << layer << ", p = " << p;
  }
}

}  // namespace

// ZeRO on GPU tensors through the MPI backend (buckets staged in pinned host memory, the kept
// chunks and the all-gather buffer on the GPU) against the same steps on the CPU.
TEST(MpiStaged, ZeroOnCudaTensorsMatchesTheCpu) {
  MNDDP_REQUIRE_GPU();
  MpiComm world;
  for (int stage : {1, 2}) {
    const auto on_gpu = adamw_steps(world, world, my_gpu(), world.rank(), stage);
    const auto on_cpu = adamw_steps(world, world, at::Device(at::kCPU), world.rank(), 0);
    for (std::size_t i = 0; i < on_gpu.size(); ++i)
      EXPECT_TRUE(at::allclose(on_gpu[i], on_cpu[i], 1e-4, 1e-6)) << "stage " << stage << ", parameter " << i;
  }
}

#if MNDDP_HAVE_NCCL
// ZeRO on NCCL (ncclReduceScatter in place, the all-gathers, the kept chunks and the pool on the
// GPU) in a world of one, against --zero 0 on the same GPU.
TEST(Nccl, ZeroStepsLikeTheWholeOptimizer) {
  MNDDP_REQUIRE_GPU();
  MpiComm self(MPI_COMM_SELF);
  NcclComm nccl(self, my_gpu().index(), 60.0);
  const auto whole = adamw_steps(self, nccl, my_gpu(), 0, 0);
  for (int stage : {1, 2}) {
    const auto sharded = adamw_steps(self, nccl, my_gpu(), 0, stage);
    for (std::size_t i = 0; i < whole.size(); ++i)
      EXPECT_TRUE(at::allclose(sharded[i], whole[i], 1e-5, 1e-7)) << "stage " << stage << ", parameter " << i;
  }
}
#endif  // MNDDP_HAVE_NCCL
