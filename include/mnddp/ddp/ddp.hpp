// DistributedDataParallel: keeps N replicas of a module identical. At construction it checks that
// every rank built the same parameters (names, shapes, dtypes) and broadcasts rank 0's parameters
// and buffers; after each backward, synchronize_gradients() averages the gradients over ranks.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

struct DdpOptions {
  bool broadcast_buffers = true;  // rank 0's buffers (e.g. BatchNorm statistics) win before each forward
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm, DdpOptions options = {});

  torch::nn::Module& module() { return *module_; }

  // Before a forward pass: rank 0's buffers to every rank (no-op without buffers or when disabled).
  void before_forward();
  // After backward: gradients become the mean over ranks. Parameters without a gradient on this rank
  // contribute zeros, so a parameter unused on some ranks cannot desynchronise the collective.
  void synchronize_gradients();

  // The signature compared across ranks: one "name shape dtype" line per parameter.
  std::string parameter_signature() const;

 private:
  void verify_same_parameters();
  void broadcast_state();

  std::shared_ptr<torch::nn::Module> module_;
  Communicator& comm_;
  DdpOptions options_;
  std::vector<at::Tensor> parameters_;  // registration order
  std::vector<at::Tensor> buffers_;
  at::Tensor flat_;  // reused gradient buffer: one all-reduce per step
};

}  // namespace mnddp
