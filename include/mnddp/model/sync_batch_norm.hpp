// SyncBatchNorm2d: BatchNorm2d whose training-mode statistics span every rank's batch, the C++
// counterpart of torch.nn.SyncBatchNorm. Same parameters and buffers as torch::nn::BatchNorm2d
// (weight, bias, running_mean, running_var, num_batches_tracked), so checkpoints and exports are
// unchanged; the communicator is handed over after construction (bind_sync_batch_norm).
#pragma once

#include <torch/nn/modules/batchnorm.h>

#include <iosfwd>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

// Batch normalisation of `input` [N, C, ...] over every rank's batch: the global per-channel mean
// and biased variance normalise, the unbiased variance goes into the running statistics (when
// defined) with weight `momentum`, and backward all-reduces the per-channel sums of the output
// gradient so the input gradient is that of one BatchNorm over the global batch. Ranks may hold
// different batch sizes (even none). A collective: every rank of `comm` must call it, in the same
// order. `weight` and `bias` may be undefined (affine=false). See Note [SyncBatchNorm collectives].
at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps,
                           Communicator& comm);

class SyncBatchNorm2dImpl : public torch::nn::BatchNormImplBase<2, SyncBatchNorm2dImpl> {
 public:
  using BatchNormImplBase<2, SyncBatchNorm2dImpl>::BatchNormImplBase;

  // Training mode: sync_batch_norm over the bound communicator (plain BatchNorm on one rank); eval
  // mode: plain BatchNorm with the running statistics, no communication. A training-mode forward
  // before a communicator is bound throws std::logic_error.
  at::Tensor forward(const at::Tensor& input);

  // The communicator must outlive every training-mode forward and backward pass; nullptr unbinds.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  Communicator* communicator() const { return comm_; }

  void pretty_print(std::ostream& stream) const override;

 protected:
  void _check_input_dim(const at::Tensor& input) override;

 private:
  Communicator* comm_ = nullptr;
};
TORCH_MODULE(SyncBatchNorm2d);

// Hands `comm` (the gradient communicator: NCCL on GPUs, MPI on CPUs) to every SyncBatchNorm2d in
// `module`, the counterpart of giving torch.nn.SyncBatchNorm its process group. Returns how many
// layers it reached (0: the model has no synchronised BatchNorm).
int bind_sync_batch_norm(torch::nn::Module& module, Communicator* comm);

}  // namespace mnddp
