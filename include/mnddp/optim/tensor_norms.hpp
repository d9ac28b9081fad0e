// Per-tensor L2 norms for the trust-ratio optimizers (LARS, LAMB). By default each tensor's own.
// Under ZeRO an optimizer's tensor is one rank's piece of a parameter while the trust ratio needs the
// whole parameter's norm: zero_optimizer.cpp plugs in norms that add every rank's pieces. Those are
// collective, so an optimizer with them asks for norms in every group, with or without tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace mnddp {

class TensorNorms {
 public:
  virtual ~TensorNorms() = default;
  // One norm per tensor, as a 1-D tensor on their device (possibly empty). tensors[k] belongs to the
  // optimizer's parameter params[k] (itself, its gradient or its update).
  virtual at::Tensor norms(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& tensors) = 0;
};

// Each tensor's own norm (what LARS and LAMB use unless told otherwise).
at::Tensor own_norms(const std::vector<at::Tensor>& tensors);

// Mixed into LARS and LAMB: the norms they use.
class UsesTensorNorms {
 public:
  void set_tensor_norms(std::shared_ptr<TensorNorms> norms) { norms_ = std::move(norms); }

 protected:
  at::Tensor norms_of(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& tensors) const {
    return norms_ ? norms_->norms(params, tensors) : own_norms(tensors);
  }
  // A group with no tensors on this rank still joins collective norms (twice: weights and update).
  void join_norms_without_tensors(int times) const {
    for (int i = 0; norms_ && i < times; ++i) norms_->norms({}, {});
  }

 private:
  std::shared_ptr<TensorNorms> norms_;
};

}  // namespace mnddp
