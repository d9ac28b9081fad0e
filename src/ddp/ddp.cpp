// DDP set-up (shape check, initial broadcast) and the per-step buffer broadcast; the gradient
// all-reduce lives in the Reducer.
#include "mnddp/ddp/ddp.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>

#include <sstream>

#include "mnddp/comm/collective_tracker.hpp"
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

namespace {

Communicator& host_only(Communicator& comm) {
  if (comm.uses_device_memory())
    throw std::invalid_argument(
        fmt::format("DDP: the {} communicator cannot carry control messages; pass an MPI control communicator too",
                    comm.backend_name()));
  return comm;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm,
                                                 DdpOptions options)
    : DistributedDataParallel(std::move(module), host_only(comm), comm, options) {}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& control,
                                                 Communicator& gradients, DdpOptions options)
    : module_(std::move(module)), control_(host_only(control)), gradients_(gradients), options_(options) {
  if (control_.size() != gradients_.size() || control_.rank() != gradients_.rank())
    throw std::invalid_argument("DDP: the control and gradient communicators must span the same ranks");
  for (const auto& b : module_->buffers()) buffers_.push_back(b);
  verify_same_parameters();
  broadcast_state();
  std::vector<at::Tensor> parameters;
  std::vector<std::string> names;
  for (const auto& item : module_->named_parameters()) {
    names.push_back(item.key());
    parameters.push_back(item.value());
  }
  reducer_ = std::make_unique<Reducer>(std::move(parameters), std::move(names), gradients_, options_.reducer);
}

std::string DistributedDataParallel::parameter_signature() const {
  std::string signature;
  // A weight's layout too (--memory-format): the gradient buckets are its bytes in that order.
  for (const auto& item : module_->named_parameters())
    signature += fmt::format(
        "{} [{}] {}{}\n", item.key(), fmt::join(item.value().sizes(), ", "), c10::toString(item.value().scalar_type()),
        item.value().is_contiguous() ? "" : fmt::format(" strides [{}]", fmt::join(item.value().strides(), ", ")));
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
  broadcast_string(control_, reference, 0);
  std::optional<Failure> failure;
  if (reference != mine) {
    const auto ref = split_lines(reference);
    const auto own = split_lines(mine);
    std::size_t i = 0;
    while (i < ref.size() && i < own.size() && ref[i] == own[i]) ++i;
    failure = Failure{
        fmt::format("model mismatch across ranks: rank 0 has '{}' where rank {} has '{}'",
                    i < ref.size() ? ref[i] : "(nothing)", control_.rank(), i < own.size() ? own[i] : "(nothing)"),
        kExitUsage};
  }
  agree_on_failure(control_, failure);
}

void DistributedDataParallel::broadcast_state() {
  const CollectiveLabel label("initial broadcast of the model");
  torch::NoGradGuard no_grad;
  for (auto& p : module_->parameters()) {
    at::Tensor data = p.detach();
    broadcast(gradients_, data, 0);
  }
  broadcast_buffers();
}

// All buffers travel in one message: a ResNet has hundreds of small BatchNorm buffers.
void DistributedDataParallel::broadcast_buffers() {
  if (buffers_.empty()) return;
  const CollectiveLabel label("buffer broadcast");
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> flat;
  for (const auto& b : buffers_) flat.push_back(b.reshape({-1}).to(at::kDouble));
  flat_buffers_ = at::cat(flat);
  broadcast(gradients_, flat_buffers_, 0);
  std::int64_t offset = 0;
  for (auto& b : buffers_) {
    b.copy_(flat_buffers_.narrow(0, offset, b.numel()).view(b.sizes()));
    offset += b.numel();
  }
}

at::Tensor DistributedDataParallel::scale_loss(const at::Tensor& loss) const {
  if (!options_.reducer.loss_prescaled || gradients_.size() == 1) return loss;
  return loss * (1.0 / gradients_.size());
}

void DistributedDataParallel::before_forward() {
  // No communication on no_sync micro-steps: they must issue no collective at all.
  if (!options_.broadcast_buffers || gradients_.size() == 1 || !reducer_->sync_enabled()) return;
  broadcast_buffers();
}

}  // namespace mnddp
