// The correct-first DDP: shape check, initial broadcast, one flat all-reduce of all gradients.
#include "mnddp/ddp/ddp.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>

#include <sstream>

#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm,
                                                 DdpOptions options)
    : module_(std::move(module)), comm_(comm), options_(options) {
  for (const auto& p : module_->parameters()) parameters_.push_back(p);
  for (const auto& b : module_->buffers()) buffers_.push_back(b);
  verify_same_parameters();
  broadcast_state();
}

std::string DistributedDataParallel::parameter_signature() const {
  std::string signature;
  for (const auto& item : module_->named_parameters())
    signature += fmt::format("{} [{}] {}\n", item.key(), fmt::join(item.value().sizes(), ", "),
                             c10::toString(item.value().scalar_type()));
  for (const auto& item : module_->named_buffers())
    signature += fmt::format("buffer {} [{}] {}\n", item.key(), fmt::join(item.value().sizes(), ", "),
                             c10::toString(item.value().scalar_type()));
  return signature;
}

// Rank 0's signature goes to all; each rank names its first differing line; the verdict is agreed,
// so a mismatch is one clear error on every rank instead of a collective that never matches.
void DistributedDataParallel::verify_same_parameters() {
  const std::string mine = parameter_signature();
  std::string reference = mine;
  broadcast_string(comm_, reference, 0);
  std::optional<Failure> failure;
  if (reference != mine) {
    const auto ref = split_lines(reference);
    const auto own = split_lines(mine);
    std::size_t i = 0;
    while (i < ref.size() && i < own.size() && ref[i] == own[i]) ++i;
    failure =
        Failure{fmt::format("model mismatch across ranks: rank 0 has '{}' where rank {} has '{}'",
                            i < ref.size() ? ref[i] : "(nothing)", comm_.rank(), i < own.size() ? own[i] : "(nothing)"),
                kExitUsage};
  }
  agree_on_failure(comm_, failure);
}

void DistributedDataParallel::broadcast_state() {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters_) {
    at::Tensor data = p.detach();
    broadcast(comm_, data, 0);
  }
  for (auto& b : buffers_) broadcast(comm_, b, 0);
}

void DistributedDataParallel::before_forward() {
  if (!options_.broadcast_buffers || buffers_.empty() || comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (auto& b : buffers_) broadcast(comm_, b, 0);
}

void DistributedDataParallel::synchronize_gradients() {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::int64_t total = 0;
  for (const auto& p : parameters_) total += p.numel();
  if (!flat_.defined() || flat_.numel() != total) flat_ = at::empty({total}, parameters_.front().options());

  std::int64_t offset = 0;
  for (auto& p : parameters_) {
    auto slot = flat_.narrow(0, offset, p.numel());
    if (p.grad().defined()) {
      slot.copy_(p.grad().reshape({-1}));
    } else {
      slot.zero_();
    }
    offset += p.numel();
  }
  allreduce(comm_, flat_, ReduceOp::Avg);
  offset = 0;
  for (auto& p : parameters_) {
    auto slot = flat_.narrow(0, offset, p.numel()).view(p.sizes());
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    p.mutable_grad().copy_(slot);
    offset += p.numel();
  }
}

}  // namespace mnddp
