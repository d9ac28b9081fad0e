// SyncBatchNorm: the autograd function (global statistics forward, all-reduced gradient sums
// backward) and the BatchNorm2d-shaped module the zoo builds under --sync-batchnorm.
#include "mnddp/model/sync_batch_norm.hpp"

#include "mnddp/model/thread_invariant_norms.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <ostream>
#include <stdexcept>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"

namespace mnddp {
namespace {

// Note [SyncBatchNorm collectives]
// PyTorch's SyncBatchNorm (torch/nn/modules/_functions.py) all-gathers each rank's (mean, invstd,
// count) and combines them with batch_norm_gather_stats_with_counts; those kernels are CUDA-only,
// and the Communicator has no tensor all-gather. Here forward takes two small all-reduces per layer
// instead, each of C or C+1 doubles on the gradient communicator:
//   1. [sum_c x, count]          -> global count N and mean;
//   2. sum_c (x - mean)^2        -> global biased variance (a two-pass variance: no E[x^2]-mean^2
//                                   cancellation, as exact as PyTorch's Welford-style combination).
// Backward takes one, as PyTorch's: [sum_dy, sum_dy_xmu] (2C doubles), after which
//   dx = (dy - sum_dy/N - (x - mean) * invstd^2 * sum_dy_xmu/N) * invstd * weight,
// and the local grad_weight = sum_dy_xmu * invstd, grad_bias = sum_dy, which DDP then sums over
// ranks like every other gradient. The sums travel as doubles so the count is exact and the float32
// partial sums lose nothing more on the way; the element-wise work runs in float32 (float64 for
// double input), half inputs being widened as PyTorch's kernels do.
// Every rank must run the same number of training-mode forward (and backward) passes through the
// same layers, in the same order: they are collectives. Eval mode communicates nothing.
//
// On a GPU the layer is PyTorch's SyncBatchNorm itself: its CUDA kernels (batch_norm_stats,
// batch_norm_gather_stats_with_counts, batch_norm_elemt, batch_norm_backward_reduce and _elemt), one
// all-gather of [mean, invstd, count] per layer forward and one all-reduce of [sum_dy, sum_dy_xmu]
// backward, channels-last inputs taken as they lie. Unlike PyTorch it drops no empty rank's row
// (its mask is a host synchronisation): every rank's micro-batch holds the same number of samples.
// Both collectives are ordered on the GPU (tensor_comm.hpp): no host wait.

at::ScalarType accumulate_type(at::ScalarType type) { return type == at::kDouble ? at::kDouble : at::kFloat; }

// Per-channel shape [1, C, 1, ...] for broadcasting against [N, C, ...].
std::vector<std::int64_t> channel_shape(const at::Tensor& input) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(input.dim()), 1);
  shape[1] = input.size(1);
  return shape;
}

// Every dimension but the channel's.
std::vector<std::int64_t> reduced_dims(const at::Tensor& input) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A sum over ranks, ordered for torch's current stream (tensor_comm.hpp).
void allreduce_sum(Communicator& comm, at::Tensor& tensor, const char* label) {
  const CollectiveLabel named(label);
  allreduce(comm, tensor, ReduceOp::Sum);
}

// The layouts torch's CUDA batch-norm kernels take as they are; anything else is made contiguous.
at::Tensor in_kernel_layout(const at::Tensor& t) {
  if (t.is_contiguous(at::MemoryFormat::ChannelsLast) || t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) return t;
  return t.contiguous();
}

// The GPU forward, as PyTorch's SyncBatchNorm computes it (see the note). Saves what cuda_backward reads.
at::Tensor cuda_forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input_, const at::Tensor& weight,
                        const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                        double momentum, double eps, Communicator& comm) {
  const at::Tensor input = in_kernel_layout(input_);
  const std::int64_t channels = input.size(1);
  auto [mean, invstd] = at::batch_norm_stats(input, eps);
  const at::Tensor count = at::full({1}, static_cast<double>(input.numel() / channels), mean.options());
  const std::int64_t row = 2 * channels + 1;
  at::Tensor gathered = at::empty({comm.size() * row}, mean.options());
  gathered.narrow(0, comm.rank() * row, row).copy_(at::cat({mean, invstd, count}));
  {
    const CollectiveLabel named("SyncBatchNorm forward: mean, invstd and count");
    allgather_in_place(comm, gathered);
  }
  const at::Tensor rows = gathered.view({comm.size(), row});
  const at::Tensor count_all = rows.narrow(1, 2 * channels, 1);
  at::Tensor counts = count_all.reshape({-1});
  if (running_mean.defined() && counts.scalar_type() != running_mean.scalar_type())
    counts = counts.to(running_mean.scalar_type());
  auto [global_mean, global_invstd] =
      at::batch_norm_gather_stats_with_counts(input, rows.narrow(1, 0, channels), rows.narrow(1, channels, channels),
                                              running_mean, running_var, momentum, eps, counts);
  ctx->save_for_backward({input, weight, global_mean, global_invstd, count_all.to(at::kInt)});
  return at::batch_norm_elemt(input, weight, bias, global_mean, global_invstd, eps);
}

// The GPU backward, as PyTorch's SyncBatchNorm computes it.
torch::autograd::variable_list cuda_backward(torch::autograd::AutogradContext* ctx, const at::Tensor& grad_out_,
                                             Communicator& comm) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& input = saved[0];
  at::Tensor weight = saved[1];
  const at::Tensor& mean = saved[2];
  const at::Tensor& invstd = saved[3];
  const at::Tensor& counts = saved[4];
  const at::Tensor grad_out = in_kernel_layout(grad_out_);
  auto [sum_dy, sum_dy_xmu, grad_weight, grad_bias] = at::batch_norm_backward_reduce(
      grad_out, input, mean, invstd, weight, ctx->needs_input_grad(0), weight.defined() && ctx->needs_input_grad(1),
      weight.defined() && ctx->needs_input_grad(2));
  at::Tensor grad_input;
  if (ctx->needs_input_grad(0)) {
    const std::int64_t channels = sum_dy.size(0);
    at::Tensor combined = at::cat({sum_dy, sum_dy_xmu});
    allreduce_sum(comm, combined, "SyncBatchNorm backward: gradient sums");
    if (weight.defined() && weight.scalar_type() != mean.scalar_type()) weight = weight.to(mean.scalar_type());
    grad_input = at::batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, combined.narrow(0, 0, channels),
                                               combined.narrow(0, channels, channels), counts);
  }
  if (!weight.defined() || !ctx->needs_input_grad(1)) grad_weight = at::Tensor();
  if (!weight.defined() || !ctx->needs_input_grad(2)) grad_bias = at::Tensor();
  return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SyncBatchNormFunction : torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input_, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            double momentum, double eps, Communicator* comm) {
    ctx->saved_data["comm"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(comm));
    ctx->saved_data["cuda"] = input_.is_cuda();
    if (input_.is_cuda())
      return cuda_forward(ctx, input_, weight.defined() ? weight.contiguous() : weight, bias, running_mean, running_var,
                          momentum, eps, *comm);
    const at::Tensor input = input_.contiguous();
    const std::int64_t channels = input.size(1);
    const auto acc = accumulate_type(input.scalar_type());
    const auto dims = reduced_dims(input);
    const auto shape = channel_shape(input);
    const at::Tensor x = input.to(acc);
    const std::int64_t local_count = channels == 0 ? 0 : input.numel() / channels;

    // 1. global count and mean
    at::Tensor first = at::cat(
        {x.sum(dims).to(at::kDouble), at::full({1}, static_cast<double>(local_count), x.options().dtype(at::kDouble))});
    allreduce_sum(*comm, first, "SyncBatchNorm forward: sum and count");
    const at::Tensor count = first.narrow(0, channels, 1);  // [1], global
    const at::Tensor mean = first.narrow(0, 0, channels) / count;

    // 2. global biased variance, around the global mean
    const at::Tensor centred = x - mean.to(acc).view(shape);
    at::Tensor second = centred.square().sum(dims).to(at::kDouble);
    allreduce_sum(*comm, second, "SyncBatchNorm forward: centred sum of squares");
    const at::Tensor var = second / count;
    const at::Tensor invstd = (var + eps).rsqrt().to(acc);

    if (running_mean.defined()) {
      // The running variance is the unbiased one, as torch's BatchNorm and SyncBatchNorm keep it.
      const at::Tensor unbiased = var * count / (count - 1);
      running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1.0 - momentum).add_(unbiased.to(running_var.scalar_type()), momentum);
    }

    at::Tensor scale = weight.defined() ? invstd * weight.to(acc) : invstd;
    at::Tensor out = centred * scale.view(shape);
    if (bias.defined()) out = out + bias.to(acc).view(shape);

    ctx->save_for_backward({input, weight, mean.to(acc), invstd, count});
    return out.to(input.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* comm = reinterpret_cast<Communicator*>(static_cast<std::intptr_t>(ctx->saved_data["comm"].toInt()));
    if (ctx->saved_data["cuda"].toBool()) return cuda_backward(ctx, grads[0], *comm);
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const at::Tensor& count = saved[4];

    const auto acc = mean.scalar_type();
    const auto dims = reduced_dims(input);
    const auto shape = channel_shape(input);
    const std::int64_t channels = input.size(1);
    const at::Tensor dy = grads[0].contiguous().to(acc);
    const at::Tensor xmu = input.to(acc) - mean.view(shape);
    at::Tensor sum_dy = dy.sum(dims);
    at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);

    at::Tensor grad_input, grad_weight, grad_bias;
    if (weight.defined() && ctx->needs_input_grad(1)) grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
    if (weight.defined() && ctx->needs_input_grad(2)) grad_bias = sum_dy.to(weight.scalar_type());
    if (ctx->needs_input_grad(0)) {
      at::Tensor sums = at::cat({sum_dy, sum_dy_xmu}).to(at::kDouble);
      allreduce_sum(*comm, sums, "SyncBatchNorm backward: gradient sums");
      sums = (sums / count).to(acc);
      const at::Tensor mean_dy = sums.narrow(0, 0, channels);
      const at::Tensor mean_dy_xmu = sums.narrow(0, channels, channels);
      const at::Tensor scale = weight.defined() ? invstd * weight.to(acc) : invstd;
      grad_input = (dy - mean_dy.view(shape) - xmu * (invstd * invstd * mean_dy_xmu).view(shape)) * scale.view(shape);
      grad_input = grad_input.to(input.scalar_type());
    }
    // One slot per forward argument: the running statistics, momentum, eps and comm get none.
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps,
                           Communicator& comm) {
  if (input.dim() < 2)
    throw std::invalid_argument(
        fmt::format("sync_batch_norm: input must be [N, C, ...], got {} dimensions", input.dim()));
  return SyncBatchNormFunction::apply(input, weight, bias, running_mean, running_var, momentum, eps, &comm);
}

at::Tensor SyncBatchNorm2dImpl::forward(const at::Tensor& input) {
  if (!is_training()) return BatchNormImplBase::forward(input);  // running statistics, no communication
  if (comm_ == nullptr)
    throw std::logic_error("SyncBatchNorm2d: a training-mode forward pass before bind_sync_batch_norm");
  if (comm_->size() == 1)  // plain BatchNorm, bit for bit
    return thread_invariant_batch_norm(input, [this](const at::Tensor& x) { return BatchNormImplBase::forward(x); });
  _check_input_dim(input);
  // The factor as torch's BatchNorm chooses it: momentum, or the cumulative average without one.
  double factor = options.momentum().value_or(0.0);
  if (options.track_running_stats() && num_batches_tracked.defined()) {
    num_batches_tracked += 1;
    if (!options.momentum().has_value()) factor = 1.0 / num_batches_tracked.item<double>();
  }
  const bool track = options.track_running_stats();
  return sync_batch_norm(input, weight, bias, track ? running_mean : at::Tensor(), track ? running_var : at::Tensor(),
                         factor, options.eps(), *comm_);
}

void SyncBatchNorm2dImpl::_check_input_dim(const at::Tensor& input) {
  TORCH_CHECK(input.dim() == 4, "SyncBatchNorm2d: expected 4D input (got ", input.dim(), "D input)");
}

void SyncBatchNorm2dImpl::pretty_print(std::ostream& stream) const {
  stream << std::boolalpha << "mnddp::SyncBatchNorm2d(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=";
  if (options.momentum().has_value())
    stream << options.momentum().value();
  else
    stream << "None";
  stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats()
         << ", communicator=" << (comm_ != nullptr ? comm_->backend_name() : "none") << ")";
}

int bind_sync_batch_norm(torch::nn::Module& module, Communicator* comm) {
  int bound = 0;
  for (const auto& child : module.modules(/*include_self=*/true))
    if (auto* bn = child->as<SyncBatchNorm2dImpl>()) {
      bn->set_communicator(comm);
      ++bound;
    }
  return bound;
}

}  // namespace mnddp
