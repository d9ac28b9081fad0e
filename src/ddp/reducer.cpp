// The bucketed, overlapped gradient all-reduce (the C++ counterpart of PyTorch's DDP reducer).
#include "mnddp/ddp/reducer.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;

// ZeRO-2: how many launched reduce-scatters may still hold their bucket buffers when backward needs
// another buffer. On a GPU, taking the oldest one's buffer makes the compute stream wait for that
// reduce-scatter; with one in flight backward and communication would take turns bucket by bucket.
constexpr std::size_t kShardBucketsInFlight = 2;

// Fires after the accumulator has added this backward's gradient into param.grad().
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(Reducer& reducer, std::size_t index) : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_.mark_ready(index_);
    return outputs;
  }

 private:
  Reducer& reducer_;
  std::size_t index_;
};

at::ScalarType wire_type(GradCompression compression, at::ScalarType param_type) {
  switch (compression) {
    case GradCompression::BF16:
      return at::kBFloat16;
    case GradCompression::FP16:
      return at::kHalf;
    case GradCompression::None:
      break;
  }
  return param_type;
}

// A parameter's slot of its bucket, laid out as the parameter is (as PyTorch's reducer does): a
// channels-last weight gets a channels-last gradient. The slot's bytes are that layout's dense
// memory; every rank builds the same model, so the same bytes mean the same elements everywhere.
at::Tensor slot_view(const at::Tensor& flat, std::size_t offset, const at::Tensor& param) {
  at::Tensor slot = flat.narrow(0, static_cast<std::int64_t>(offset), param.numel());
  if (param.is_non_overlapping_and_dense()) return slot.as_strided(param.sizes(), param.strides());
  return slot.view(param.sizes());
}

}  // namespace

struct Reducer::Bucket {
  std::vector<std::size_t> members;
  at::Tensor flat;     // every member's gradient, in the wire dtype, on the gradients' device
  at::Tensor storage;  // shard_gradients: the pooled buffer `flat` is the front of, while in use
  // What the collective runs on: `flat` itself, or (a host communicator, gradients on a GPU) its
  // pinned host copy, filled and emptied by asynchronous copies on the gradients' stream.
  at::Tensor wire;
  at::Tensor staging;  // the pinned host buffer `wire` is the front of, kept from step to step
  std::size_t pending = 0;
  std::shared_ptr<CommWork> work;
  std::string label;       // "gradient bucket 2 (first: fc.weight)", for the watchdog and the desync check
  bool prescaled = false;  // half-precision buckets are divided before the sum (no overflow)
  // Gradients are views into `flat` (same dtype and device): autograd accumulates straight into the
  // bucket, so nothing is copied in before the all-reduce or out after it.
  bool grads_are_views = false;
};

Reducer::Reducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, Communicator& comm,
                 ReducerOptions options)
    : names_(std::move(names)), comm_(comm), options_(options) {
  // Only trainable parameters take part; names follow them.
  std::vector<std::string> kept_names;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].requires_grad()) continue;
    params_.push_back(parameters[i]);
    kept_names.push_back(i < names_.size() ? names_[i] : fmt::format("parameter {}", i));
  }
  names_ = std::move(kept_names);
  if (params_.empty()) throw UsageError("DDP: the model has no trainable parameters");

  for (const auto& p : params_) {
    bytes_.push_back(static_cast<std::size_t>(p.numel()) * p.element_size());
    keys_.push_back(static_cast<int>(p.scalar_type()) * 1024 + static_cast<int>(p.device().type()) * 64 +
                    static_cast<int>(p.device().index() + 1));
  }
  plan_ = plan_buckets(bytes_, keys_, options_.limits);
  // One rank, no compression: the mean over ranks is each gradient itself, so there is nothing to
  // stage, reduce or copy back, and autograd's gradients stay where it put them (as torch's
  // zero_grad(set_to_none) leaves them: no fill, no accumulation pass, no copy).
  solo_ = comm_.size() == 1 && options_.compression == GradCompression::None && !options_.shard_gradients;
  // A host communicator (MPI) with gradients on a GPU: the buckets stay on the device (gradients are
  // views of them, as with NCCL) and each is copied to pinned host memory once, at its launch, and
  // back once it is reduced: two copies a bucket, queued on the stream, instead of one blocking
  // copy per parameter inside the autograd hooks.
  staged_ = !comm_.uses_device_memory() && !params_.front().device().is_cpu();
  std::vector<at::TensorOptions> wire_options, kept_options;

  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->members = plan_[b];
    std::int64_t elements = 0;
    for (std::size_t i : bucket->members) {
      bucket_of_[i] = b;
      slot_of_[i] = static_cast<std::size_t>(elements);
      elements += params_[i].numel();
    }
    const at::Tensor& first = params_[bucket->members.front()];
    const at::ScalarType type = wire_type(options_.compression, first.scalar_type());
    const auto buffer_options = at::TensorOptions().dtype(type).device(first.device());
    if (!solo_ && !options_.shard_gradients) bucket->flat = at::zeros({elements}, buffer_options);
    // Half-precision buckets are divided before the sum so that it cannot overflow.
    bucket->prescaled = !options_.loss_prescaled && (type == at::kBFloat16 || type == at::kHalf);
    // Sharded buckets come and go, so gradients cannot live in them.
    bucket->grads_are_views = type == first.scalar_type() && !options_.shard_gradients;
    wire_options.push_back(buffer_options);
    kept_options.push_back(first.options());
    buckets_.push_back(std::move(bucket));
  }
  if (options_.shard_gradients) {
    std::vector<std::int64_t> numel;
    for (const auto& p : params_) numel.push_back(p.numel());
    shards_ = std::make_unique<GradientShards>(ShardLayout(plan_, numel, comm_.size()), comm_.rank(),
                                               std::move(wire_options), std::move(kept_options));
  }
  unused_everywhere_.assign(params_.size(), false);

  ready_.assign(params_.size(), false);
  locally_used_.assign(params_.size(), false);
  if (options_.find_unused_parameters && !solo_) {
    const at::Tensor& first = params_.front();
    const bool device_side = comm_.uses_device_memory() && first.is_cuda();
    used_map_ =
        at::zeros({static_cast<std::int64_t>(params_.size())},
                  at::TensorOptions().dtype(at::kInt).device(device_side ? first.device() : at::Device(at::kCPU)));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    if (!accumulator) throw Error(fmt::format("DDP: parameter '{}' has no gradient accumulator", names_[i]));
    hook_keys_.push_back(accumulator->add_post_hook(std::make_unique<ReadyHook>(*this, i)));
    accumulators_.push_back(accumulator);  // autograd holds accumulators only weakly
  }
}

Reducer::~Reducer() {
  for (std::size_t i = 0; i < accumulators_.size(); ++i)
    std::static_pointer_cast<torch::autograd::Node>(accumulators_[i])->del_post_hook(hook_keys_[i]);
  // A step abandoned mid-way (an exception during backward) may still have collectives in flight;
  // they must finish before their buffers go.
  for (auto& bucket : buckets_) {
    if (!bucket->work) continue;
    try {
      bucket->work->wait();  // host: the buffers are about to go
    } catch (...) {
      // Already failing; the error that brought us here is the one to report.
    }
  }
}

void Reducer::zero_grad() {
  std::lock_guard lock(mutex_);
  // Set to none, as torch's zero_grad does by default: backward's gradient is then moved into place
  // (no accumulation pass over a zeroed buffer) and staged into its bucket by one copy, after which
  // the gradient is a view of the bucket again until the next step.
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void Reducer::set_sync(bool enabled) {
  std::lock_guard lock(mutex_);
  sync_ = enabled;
}

void Reducer::begin_step() {
  step_active_ = true;
  next_launch_ = 0;
  next_release_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  for (auto& bucket : buckets_) {
    bucket->pending = bucket->members.size();
    bucket->work.reset();
  }
  stats_ = ReducerStats{};
}

void Reducer::prepare_for_backward(const at::Tensor& loss) {
  std::lock_guard lock(mutex_);
  if (!sync_ || solo_) return;
  begin_step();
  if (!options_.find_unused_parameters) return;
  mark_unreached_ready(loss);
  launch_complete_buckets();
}

void Reducer::log_ready_times(std::vector<std::chrono::steady_clock::time_point>* times) {
  std::lock_guard lock(mutex_);
  ready_times_ = times;
  if (times != nullptr) times->assign(params_.size(), {});
}

void Reducer::mark_ready(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (ready_times_ != nullptr) (*ready_times_)[index] = std::chrono::steady_clock::now();
  // Use counts across no_sync micro-steps (PyTorch's local_used_map does the same).
  locally_used_[index] = true;
  if (!sync_ || solo_) return;
  if (!step_active_) begin_step();
  if (ready_[index])
    throw Error(
        fmt::format("DDP: parameter '{}' received its gradient twice in one backward pass; call finalize() "
                    "after every synchronised backward",
                    names_[index]));
  ready_[index] = true;
  const at::Tensor& grad = params_[index].grad();
  stage_gradient(index, grad.defined() ? &grad : nullptr);
  launch_complete_buckets();
}

void Reducer::stage_current_gradient(std::size_t index) {
  const at::Tensor& grad = params_[index].grad();
  stage_gradient(index, grad.defined() ? &grad : nullptr);
}

// Copies (and converts) one gradient into its bucket slot; nullptr stages zeros.
void Reducer::stage_gradient(std::size_t index, const at::Tensor* grad) {
  Bucket& bucket = *buckets_[bucket_of_[index]];
  at::Tensor& param = params_[index];
  if (shards_ && !bucket.flat.defined()) {
    // A bounded pool: beyond kShardBucketsInFlight launched reduce-scatters, wait for the oldest and
    // take its buffer (all ranks launch in the same order, so it completes) rather than allocate.
    // Without a bound every bucket of the model was alive at the end of backward, which is the whole
    // gradient again.
    release_finished_buckets(/*wait=*/false);
    while (!shards_->has_free(bucket_of_[index]) && next_launch_ - next_release_ >= kShardBucketsInFlight)
      release_oldest_bucket();
    bucket.storage = shards_->acquire(bucket_of_[index]);
    bucket.flat = bucket.storage.narrow(0, 0, shards_->layout().padded(bucket_of_[index]));
  }
  at::Tensor slot = slot_view(bucket.flat, slot_of_[index], param);
  const bool already_there = grad != nullptr && bucket.grads_are_views && grad->data_ptr() == slot.data_ptr() &&
                             grad->strides() == slot.strides();
  if (!already_there) {
    // The gradient lives elsewhere (first step, zero_grad(set_to_none), compression, host staging).
    if (grad != nullptr) {
      slot.copy_(*grad);
    } else {
      slot.zero_();
    }
    if (bucket.grads_are_views) param.mutable_grad() = slot;
  }
  // ZeRO-2: the full gradient is in the bucket now; the rank keeps only its shard of the sum.
  if (shards_) param.mutable_grad() = at::Tensor();
  --bucket.pending;
}

// Buckets start strictly in plan order, so every rank issues the same sequence of collectives even
// when its gradients become ready in a different order.
void Reducer::launch_complete_buckets() {
  // Without overlap, buckets wait for finalize() (which clears step_active_ first).
  if (!options_.overlap && step_active_) return;
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) launch(*buckets_[next_launch_++]);
  if (shards_) release_finished_buckets(/*wait=*/false);
}

void Reducer::release_finished_buckets(bool wait) {
  while (next_release_ < next_launch_) {
    // In order: the channel runs them in order.
    if (!wait && !buckets_[next_release_]->work->is_completed()) return;
    release_oldest_bucket();
  }
}

void Reducer::complete(Bucket& bucket) {
  const auto consumer = current_stream_of(bucket.flat);
  wait_for(*bucket.work, consumer);  // a host communicator: on the host, whatever the consumer
  if (!bucket.wire.is_same(bucket.flat)) bucket.flat.copy_(bucket.wire, /*non_blocking=*/true);
}

void Reducer::release_oldest_bucket() {
  Bucket& bucket = *buckets_[next_release_];
  complete(bucket);
  shards_->keep_chunk_and_release(next_release_, bucket.flat, std::move(bucket.storage));
  bucket.flat = at::Tensor();
  bucket.storage = at::Tensor();
  ++next_release_;
}

void Reducer::launch(Bucket& bucket) {
  const auto stream = current_stream_of(bucket.flat);
  if (bucket.prescaled) bucket.flat.mul_(1.0 / comm_.size());
  bucket.wire = bucket.flat;
  if (staged_) {
    if (!bucket.staging.defined() || bucket.staging.numel() < bucket.flat.numel())
      bucket.staging = at::empty({bucket.flat.numel()}, bucket.flat.options().device(at::kCPU).pinned_memory(true));
    bucket.wire = bucket.staging.narrow(0, 0, bucket.flat.numel());
    bucket.wire.copy_(bucket.flat, /*non_blocking=*/true);  // the channel's thread waits for it (HostFence)
  }
  if (bucket.label.empty()) {
    const auto index =
        std::find_if(buckets_.begin(), buckets_.end(), [&](const auto& b) { return b.get() == &bucket; }) -
        buckets_.begin();
    bucket.label = fmt::format("gradient bucket {} (first: {})", index, names_[bucket.members.front()]);
  }
  const CollectiveLabel label(bucket.label);
  const ReduceOp op = bucket.prescaled || options_.loss_prescaled ? ReduceOp::Sum : ReduceOp::Avg;
  bucket.work =
      shards_ ? reduce_scatter_async(comm_, bucket.wire, op, stream) : allreduce_async(comm_, bucket.wire, op, stream);
  if (step_active_) ++stats_.buckets_launched_in_backward;
  if (&bucket == buckets_.front().get()) stats_.first_bucket_ready = Clock::now();
}

void Reducer::finalize() {
  std::lock_guard lock(mutex_);
  if (!sync_) return;
  if (solo_) return finalize_alone();
  if (!step_active_) begin_step();  // this rank computed no gradient at all: it still takes part
  step_active_ = false;             // launches from here on are not overlapped

  // Parameters whose hook did not fire in this backward contribute what they hold (accumulated in
  // no_sync micro-steps) or zeros, in the same bucket order as everyone else.
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (ready_[i]) continue;
    if (!locally_used_[i]) missing.push_back(i);
    ready_[i] = true;
    stage_current_gradient(i);
  }
  launch_complete_buckets();
  if (!missing.empty() && !options_.find_unused_parameters) warn_missing_once(missing.front(), missing.size());

  const auto wait_start = Clock::now();
  // On a GPU the step's later work waits for the buckets on the GPU; the host goes on.
  if (shards_) {
    release_finished_buckets(/*wait=*/true);
  } else {
    for (auto& bucket : buckets_) complete(*bucket);
  }
  // After every bucket, in the same order on every rank.
  const std::vector<bool> unused_everywhere =
      options_.find_unused_parameters ? globally_unused() : std::vector<bool>(params_.size(), false);
  unused_everywhere_ = unused_everywhere;
  const auto done = Clock::now();  // all buckets complete
  stats_.finalize_wait_s = std::chrono::duration<double>(done - wait_start).count();

  for (std::size_t i = 0; i < params_.size() && !shards_; ++i) {
    Bucket& bucket = *buckets_[bucket_of_[i]];
    at::Tensor& param = params_[i];
    // No rank used it: no gradient at all, so the optimizer leaves it (and its state) alone.
    if (unused_everywhere[i]) {
      param.mutable_grad() = at::Tensor();
      continue;
    }
    if (bucket.grads_are_views) continue;  // reduced in place already
    const at::Tensor averaged = slot_view(bucket.flat, slot_of_[i], param);
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    param.mutable_grad().copy_(averaged);
  }
  last_works_.clear();
  for (auto& bucket : buckets_) last_works_.push_back(std::move(bucket->work));
  std::fill(locally_used_.begin(), locally_used_.end(), false);
}

double Reducer::last_comm_seconds() {
  double total = 0.0;
  for (auto& work : last_works_)
    if (work) total += work->busy_seconds();
  return total;
}

}  // namespace mnddp
