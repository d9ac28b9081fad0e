// DistributedDataParallel: keeps N replicas of a module identical. At construction it checks that
// every rank built the same parameters (names, shapes, dtypes) and broadcasts rank 0's parameters
// and buffers. Each synchronised step, the Reducer all-reduces gradients in buckets while backward
// runs; no_sync() turns micro-steps of gradient accumulation into local-only backward passes.
// Two communicators: `control` (MPI) carries the signature check and the agreement on it; `gradients`
// (NCCL on GPUs, else the same MPI communicator) carries tensors only, in the memory it declares:
// the parameter and buffer broadcasts and the gradient buckets.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/ddp/reducer.hpp"

namespace mnddp {

struct DdpOptions {
  bool broadcast_buffers = true;  // rank 0's buffers (e.g. BatchNorm statistics) win before each forward
  ReducerOptions reducer;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& control, Communicator& gradients,
                          DdpOptions options = {});
  // One host (MPI) communicator for both planes. Throws std::invalid_argument for a device
  // communicator, which cannot carry control messages.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm, DdpOptions options = {});

  torch::nn::Module& module() { return *module_; }
  Reducer& reducer() { return *reducer_; }

  // Before a forward pass of a synchronised step: rank 0's buffers to every rank, in one broadcast.
  void before_forward();
  // Around backward of a synchronised step: prepare (finds unused parameters), then finalize
  // (waits for the buckets and writes averaged gradients).
  void prepare_for_backward(const at::Tensor& loss) { reducer_->prepare_for_backward(loss); }
  void finalize() { reducer_->finalize(); }
  // The loss to call backward() on: divided by the world size when the reducer sums pre-divided
  // gradients (ReducerOptions::loss_prescaled), unchanged otherwise.
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Before each optimizer step's first backward (instead of the optimizer's zero_grad).
  void zero_grad() { reducer_->zero_grad(); }

  // While alive, backward passes accumulate gradients locally and nothing is communicated.
  class NoSync {
   public:
    explicit NoSync(Reducer& reducer) : reducer_(reducer) { reducer_.set_sync(false); }
    ~NoSync() { reducer_.set_sync(true); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Reducer& reducer_;
  };
  NoSync no_sync() { return NoSync(*reducer_); }

  // Rank 0's buffers to every rank now. Each rank's forward passes update its own BatchNorm
  // statistics, so call this before evaluating or checkpointing, which need one agreed model.
  void sync_buffers() { broadcast_buffers(); }

  // The signature compared across ranks: one "name shape dtype" line per parameter and buffer.
  std::string parameter_signature() const;

 private:
  void verify_same_parameters();
  void broadcast_state();
  void broadcast_buffers();

  std::shared_ptr<torch::nn::Module> module_;
  Communicator& control_;
  Communicator& gradients_;
  DdpOptions options_;
  std::vector<at::Tensor> buffers_;
  at::Tensor flat_buffers_;  // reused staging for the coalesced buffer broadcast
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace mnddp
