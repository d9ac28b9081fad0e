// What the GPU tests (test_gpu.cpp, test_nccl_pair.cpp) share: the skip without a GPU, each rank's
// device, a small MLP and the steps both files train it for (one synchronised step's averaged
// gradients; three AdamW steps with or without ZeRO), each on any device over any communicator, so a
// GPU run can be held against a CPU one.
#pragma once

#include <ATen/ATen.h>
#include <mpi.h>
#include <torch/cuda.h>
#include <torch/nn.h>

#include <memory>
#include <vector>

#include "mnddp/build_config.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/optim/optim.hpp"
#include "mnddp/zero/zero_partition.hpp"

#define MNDDP_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    if (!MNDDP_HAVE_CUDA || !torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (0)

namespace mnddp::gpu_tests {

// This rank's GPU: rank % devices (two ranks share a lone GPU).
inline at::Device my_gpu() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank % torch::cuda::device_count()));
}

inline torch::nn::Sequential make_mlp(at::Device device) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256),
                            torch::nn::ReLU(), torch::nn::Linear(256, 10));
  net->to(device);
  return net;
}

// The averaged gradients of one synchronised step (rank `rank`'s own batch) on `device`, gradients
// over `gradients`, control messages over `control`; on the CPU. `launched`: where to say how many
// buckets started during backward.
inline std::vector<at::Tensor> reduced_grads(Communicator& control, Communicator& gradients, at::Device device,
                                             int rank, GradCompression compression = GradCompression::None,
                                             std::size_t* launched = nullptr) {
  auto net = make_mlp(device);
  DdpOptions options;
  options.reducer.limits.first_cap_bytes = 4096;
  options.reducer.limits.cap_bytes = 65536;
  options.reducer.compression = compression;
  DistributedDataParallel ddp(net.ptr(), control, gradients, options);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(50 + rank);
  at::Tensor loss = net->forward(at::randn({32, 64}, gen).to(device)).pow(2).mean();
  ddp.prepare_for_backward(loss);
  loss.backward();
  ddp.finalize();
  if (launched != nullptr) *launched = ddp.reducer().last_stats().buckets_launched_in_backward;
  std::vector<at::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.grad().to(at::kCPU));
  return out;
}

// Parameters after three AdamW steps with ZeRO stage `stage` (0: the whole optimizer), buckets of at
// most `cap_bytes`; on the CPU.
inline std::vector<at::Tensor> adamw_steps(Communicator& control, Communicator& gradients, at::Device device, int rank,
                                           int stage, std::size_t cap_bytes = 65536) {
  auto net = make_mlp(device);
  DdpOptions options;
  options.reducer.limits.first_cap_bytes = 4096;
  options.reducer.limits.cap_bytes = cap_bytes;
  options.reducer.shard_gradients = stage >= 2;
  DistributedDataParallel ddp(net.ptr(), control, gradients, options);
  TrainingConfig config;
  config.optimizer = OptimizerKind::AdamW;
  config.lr = 0.01;
  std::unique_ptr<ZeroPartition> zero;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (stage == 0) {
    optimizer = make_optimizer(config, net->named_parameters());
  } else {
    zero = std::make_unique<ZeroPartition>(stage, ddp.reducer(), gradients);
    optimizer = make_optimizer(config, zero->parameter_groups(true));
    zero->attach(*optimizer);
  }
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(70 + 10 * step + rank);
    at::Tensor loss = net->forward(at::randn({32, 64}, gen).to(device)).pow(2).mean();
    ddp.prepare_for_backward(loss);
    loss.backward();
    ddp.finalize();
    if (zero) zero->bind_gradients();
    optimizer->step();
    if (zero) zero->all_gather_parameters();
  }
  std::vector<at::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().to(at::kCPU));
  return out;
}

}  // namespace mnddp::gpu_tests
