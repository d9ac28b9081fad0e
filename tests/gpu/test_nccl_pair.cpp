// NCCL across two ranks, with data that differs by rank, so that a result differs from every input and
// rank 1's offsets, the transport and the ordering between ranks all matter (a world of one checks
// none of them). Two ranks on two GPUs, or on one GPU with each rank its own NCCL_HOSTID and sockets
// over loopback (tests/gpu/one_gpu_pair.sh sets them; NCCL then takes the ranks for two hosts).
// Covers the GPU review's F1 (collectives ordered on the GPU leave the host free), F4 (an abort ends
// a stuck wait with an error, not a crash), F9 (SyncBatchNorm on torch's CUDA kernels), F10 (with
// unused parameters SyncBatchNorm and the buckets keep one order), F12 (records close without a
// watchdog; busy time measured) and the reducer, ZeRO-2 and the primitives themselves.
#include <ATen/ATen.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn.h>

#include <chrono>
#include <thread>

#include "gpu_test_support.hpp"
#include "mnddp/build_config.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/nccl_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/device_binding.hpp"
#include "mnddp/error.hpp"
#include "mnddp/host_waits.hpp"
#include "mnddp/model/sync_batch_norm.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/zero/zero_partition.hpp"

using namespace mnddp;
using namespace mnddp::gpu_tests;

namespace {

using Clock = std::chrono::steady_clock;

// One control communicator and one NCCL communicator for the whole file (NCCL's set-up over sockets
// takes a second).
MpiComm& control() {
  static auto* comm = new MpiComm(MPI_COMM_WORLD, "pair-control");
  return *comm;
}
NcclComm& nccl() {
  static NcclComm* comm = [] {
    set_rank_device(my_gpu().index());
    return new NcclComm(control(), my_gpu().index(), 120.0);
  }();
  return *comm;
}

int rank() { return control().rank(); }

at::TensorOptions on_gpu(at::ScalarType type = at::kFloat) { return at::TensorOptions().dtype(type).device(my_gpu()); }

// Rank r's values: small integers, exact in every float type, different on each rank.
at::Tensor rank_values(std::int64_t n, int r, at::ScalarType type) {
  return (at::arange(n, at::kFloat).remainder(13).mul(r + 1).sub(3 * r)).to(type);
}

}  // namespace

TEST(NcclPair, AllreduceInEveryTypeAndOpDiffersFromEveryInput) {
  MNDDP_REQUIRE_GPU();
  ASSERT_EQ(nccl().size(), 2);
  const std::int64_t n = 5000;
  for (const auto type : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor mine = rank_values(n, rank(), type);
    const at::Tensor other = rank_values(n, 1 - rank(), type);
    const at::Tensor a = mine.to(at::kFloat), b = other.to(at::kFloat);
    const std::pair<ReduceOp, at::Tensor> cases[] = {{ReduceOp::Sum, a + b},
                                                     {ReduceOp::Avg, (a + b) / 2},
                                                     {ReduceOp::Max, at::maximum(a, b)},
                                                     {ReduceOp::Min, at::minimum(a, b)}};
    for (const auto& [op, expected] : cases) {
      at::Tensor t = mine.to(my_gpu());
      allreduce(nccl(), t, op);
      EXPECT_TRUE(at::equal(t.to(at::kCPU).to(at::kFloat), expected))
          << c10::toString(type) << " op " << static_cast<int>(op) << " on rank " << rank();
    }
    at::Tensor sum = mine.to(my_gpu());
    allreduce(nccl(), sum, ReduceOp::Sum);
    EXPECT_FALSE(at::equal(sum.to(at::kCPU), mine)) << "the sum is this rank's own input";
  }
}

// In place: rank r's result lands in its own chunk, at r * count (NCCL's in-place rule).
TEST(NcclPair, ReduceScatterInPlaceLandsInEachRanksChunk) {
  MNDDP_REQUIRE_GPU();
  const std::int64_t count = 1000;
  at::Tensor buffer = (at::arange(2 * count, on_gpu()) * 0.5f + 100.0f * rank());
  auto work = reduce_scatter_async(nccl(), buffer, ReduceOp::Sum, current_stream_of(buffer));
  wait_for(*work, current_stream_of(buffer));
  const at::Tensor mine = buffer.narrow(0, rank() * count, count).to(at::kCPU);
  const at::Tensor expected = at::arange(rank() * count, (rank() + 1) * count, at::kFloat) + 100.0f;
  EXPECT_TRUE(at::equal(mine, expected)) << "rank " << rank() << "'s chunk";
}

TEST(NcclPair, AllgatherInPlaceAndBroadcastFromRankZero) {
  MNDDP_REQUIRE_GPU();
  const std::int64_t count = 700;
  at::Tensor gathered = at::full({2 * count}, -1.0f, on_gpu());
  gathered.narrow(0, rank() * count, count).copy_(at::arange(count, on_gpu()) + 10.0f * rank());
  allgather_in_place(nccl(), gathered);
  const at::Tensor expected = at::cat({at::arange(count, at::kFloat), at::arange(count, at::kFloat) + 10.0f});
  EXPECT_TRUE(at::equal(gathered.to(at::kCPU), expected));

  at::Tensor t = rank() == 0 ? at::arange(count, on_gpu()) * 3.0f : at::zeros({count}, on_gpu());
  broadcast(nccl(), t, 0);
  EXPECT_TRUE(at::equal(t.to(at::kCPU), at::arange(count, at::kFloat) * 3.0f)) << "rank " << rank();
}

// mnddp preflight's link test: each rank sends to the other while receiving from it.
TEST(NcclPair, SendReceiveBothWays) {
  MNDDP_REQUIRE_GPU();
  const std::int64_t bytes = 1 << 20;
  const at::Tensor send = at::full({bytes}, rank() + 1, on_gpu(at::kByte));
  at::Tensor recv = at::zeros({bytes}, on_gpu(at::kByte));
  nccl().send_receive(send.data_ptr(), 1 - rank(), recv.data_ptr(), 1 - rank(), static_cast<std::size_t>(bytes));
  EXPECT_TRUE(at::all(recv.to(at::kCPU) == (2 - rank())).item<bool>());
}

// F1: a tensor collective is queued after the current stream's work and the stream waits for it on
// the GPU; the host goes on at once, with no host wait counted.
TEST(NcclPair, StreamOrderedCollectivesLeaveTheHostFree) {
  MNDDP_REQUIRE_GPU();
  c10::cuda::CUDAGuard guard(my_gpu());
  at::Tensor t = at::zeros({1 << 16}, on_gpu());
  // NCCL connects lazily, per algorithm and size: the first such calls set up outside the timing.
  allreduce(nccl(), t, ReduceOp::Sum);
  broadcast(nccl(), t, 1);
  torch::cuda::synchronize();
  const std::uint64_t waits = host_waits();
  const auto start = Clock::now();
  at::cuda::sleep(400'000'000);  // ~0.2 s of GPU time ahead of the collectives
  t.fill_(1.0f + rank());
  allreduce(nccl(), t, ReduceOp::Sum);
  broadcast(nccl(), t, 1);
  at::Tensor out = t * 2.0f;
  const double queued_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(queued_s, 0.1) << "the host waited for the GPU";
  EXPECT_EQ(host_waits(), waits) << "a host wait inside stream-ordered collectives";
  EXPECT_TRUE(at::all(out.to(at::kCPU) == 6.0f).item<bool>());  // (1 + 2) * 2, read after the sleep
}

// F12: the records of collectives waited for on a stream close when the next one is launched (no
// watchdog in this process), and a collective's busy time is measured on the GPU.
TEST(NcclPair, RecordsCloseWithoutAWatchdogAndBusyTimeIsMeasured) {
  MNDDP_REQUIRE_GPU();
  at::Tensor t = at::ones({1 << 22}, on_gpu());
  std::shared_ptr<CommWork> last;
  for (int i = 0; i < 40; ++i) {
    last = allreduce_async(nccl(), t, ReduceOp::Max, current_stream_of(t));
    last->wait_on(*current_stream_of(t));
  }
  torch::cuda::synchronize();
  allreduce_async(nccl(), t, ReduceOp::Max, current_stream_of(t))->wait();
  for (const auto& s : CollectiveTracker::snapshot_all())
    if (s.channel == "nccl") {
      EXPECT_EQ(s.started, s.finished) << "records left open";
    }
  EXPECT_GT(last->busy_seconds(), 0.0);
}

// The reducer over NCCL, buckets launched during backward, against the same step over MPI on the CPU
// (each rank its own batch, so the average is not any rank's gradient); and bf16 compression.
TEST(NcclPair, ReducerMatchesTheMpiReducer) {
  MNDDP_REQUIRE_GPU();
  for (const auto compression : {GradCompression::None, GradCompression::BF16}) {
    std::size_t launched = 0;
    const auto gpu = reduced_grads(control(), nccl(), my_gpu(), rank(), compression, &launched);
    EXPECT_GT(launched, 0u) << "buckets must start during backward";
    const auto cpu = reduced_grads(control(), control(), at::Device(at::kCPU), rank(), compression);
    for (std::size_t i = 0; i < gpu.size(); ++i)
      EXPECT_TRUE(at::allclose(gpu[i], cpu[i], compression == GradCompression::None ? 1e-4 : 2e-2, 1e-5))
          << "parameter " << i << ", compression " << static_cast<int>(compression);
  }
}

namespace {

// SyncBatchNorm forward and backward on `device` with rank-specific input; output, input gradient and
// running statistics on the CPU.
std::vector<at::Tensor> sync_bn_step(Communicator& comm, at::Device device, bool channels_last) {
  SyncBatchNorm2d bn(torch::nn::BatchNormOptions(6));
  bn->to(device);
  bind_sync_batch_norm(*bn, &comm);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(90 + rank());
  at::Tensor x = (at::randn({4 + 2 * rank(), 6, 5, 7}, gen) * (1 + rank()) + rank()).to(device);
  if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  x.set_requires_grad(true);
  at::Tensor y = bn->forward(x);
  (y * y.detach().cos()).sum().backward();
  bind_sync_batch_norm(*bn, nullptr);
  return {y.detach().to(at::kCPU), x.grad().to(at::kCPU), bn->running_mean.to(at::kCPU), bn->running_var.to(at::kCPU),
          bn->weight.grad().to(at::kCPU)};
}

}  // namespace

// F9: the CUDA path (torch's SyncBatchNorm kernels, channels-last taken as it is) against the CPU
// path over MPI, with different batch sizes on the two ranks.
TEST(NcclPair, SyncBatchNormKernelsMatchTheCpuPath) {
  MNDDP_REQUIRE_GPU();
  const auto cpu = sync_bn_step(control(), at::Device(at::kCPU), false);
  for (const bool channels_last : {false, true}) {
    const auto gpu = sync_bn_step(nccl(), my_gpu(), channels_last);
    const char* names[] = {"output", "input gradient", "running mean", "running var", "weight gradient"};
    for (std::size_t i = 0; i < gpu.size(); ++i)
      EXPECT_TRUE(at::allclose(gpu[i], cpu[i], 1e-4, 1e-4))
          << names[i] << (channels_last ? " (channels-last)" : "") << ": max difference "
          << (gpu[i] - cpu[i]).abs().max().item<double>();
  }
}

namespace {

// A model whose second head only rank 1 uses, with SyncBatchNorm between them and the loss.
struct TwoHeads : torch::nn::Module {
  TwoHeads() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    bn = register_module("bn", SyncBatchNorm2d(torch::nn::BatchNormOptions(8)));
    shared = register_module("shared", torch::nn::Linear(8, 4));
    only_rank1 = register_module("only_rank1", torch::nn::Linear(8, 4));
  }
  at::Tensor forward(const at::Tensor& x, bool second) {
    at::Tensor h = bn->forward(conv->forward(x)).relu().mean({2, 3});
    at::Tensor out = shared->forward(h);
    return second ? out + only_rank1->forward(h) : out;
  }
  torch::nn::Conv2d conv{nullptr};
  SyncBatchNorm2d bn{nullptr};
  torch::nn::Linear shared{nullptr}, only_rank1{nullptr};
};

}  // namespace

// F10: with --find-unused-parameters and SyncBatchNorm the buckets wait for finalize() (what
// module_options sets), so rank 0, which never uses a head, issues its collectives in rank 1's
// order. Three steps end, and the averaged gradients are the same on both ranks.
TEST(NcclPair, UnusedParametersWithSyncBatchNormKeepOneOrder) {
  MNDDP_REQUIRE_GPU();
  torch::manual_seed(4);
  auto model = std::make_shared<TwoHeads>();
  model->to(my_gpu());
  bind_sync_batch_norm(*model, &nccl());
  DdpOptions options;
  options.reducer.find_unused_parameters = true;
  options.reducer.overlap = false;
  options.reducer.limits.first_cap_bytes = 64;  // several buckets
  options.reducer.limits.cap_bytes = 256;
  DistributedDataParallel ddp(model, control(), nccl(), options);
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(step * 10 + rank());
    at::Tensor loss = model->forward(at::randn({6, 3, 8, 8}, gen).to(my_gpu()), rank() == 1).pow(2).mean();
    ddp.prepare_for_backward(loss);
    loss.backward();
    ddp.finalize();
    EXPECT_EQ(ddp.reducer().last_stats().buckets_launched_in_backward, 0u);
  }
  at::Tensor grad = model->conv->weight.grad().to(at::kCPU).contiguous();
  at::Tensor both = at::empty({2, grad.numel()});
  control().allgather(grad.data_ptr(), both.data_ptr(), static_cast<std::size_t>(grad.numel()), DType::F32);
  EXPECT_TRUE(at::equal(both[0], both[1])) << "the replicas' gradients differ";
  bind_sync_batch_norm(*model, nullptr);
}

// ZeRO-1 and -2 over NCCL across two ranks (rank 1's chunks at their offsets, the pool with buckets
// in flight) against the whole optimizer over MPI on the CPU.
TEST(NcclPair, ZeroMatchesTheWholeOptimizer) {
  MNDDP_REQUIRE_GPU();
  const auto whole = adamw_steps(control(), control(), at::Device(at::kCPU), rank(), 0, 16384);
  for (int stage : {1, 2}) {
    // Many buckets: several reduce-scatters in flight at once.
    const auto sharded = adamw_steps(control(), nccl(), my_gpu(), rank(), stage, 16384);
    for (std::size_t i = 0; i < whole.size(); ++i)
      EXPECT_TRUE(at::allclose(sharded[i], whole[i], 1e-4, 1e-6)) << "stage " << stage << ", parameter " << i;
  }
}

// F4, last (it leaves an aborted communicator behind): rank 0 starts a collective rank 1 never joins;
// another thread aborts the communicator; the wait ends with an error, not a crash, within seconds.
TEST(NcclPair, AnAbortEndsAStuckWaitWithAnError) {
  MNDDP_REQUIRE_GPU();
  NcclComm doomed(control(), my_gpu().index(), 120.0);
  at::Tensor t = at::ones({1 << 20}, on_gpu());
  if (rank() == 0) {
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      doomed.abort();
    });
    const auto start = Clock::now();
    EXPECT_THROW(allreduce_async(doomed, t, ReduceOp::Sum, current_stream_of(t))->wait(), Error);
    aborter.join();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
    EXPECT_THROW(doomed.check_async_error(), Error) << "an aborted communicator must refuse every use";
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    doomed.abort();
  }
  control().barrier();
}
