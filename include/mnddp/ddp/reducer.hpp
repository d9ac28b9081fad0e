// Reducer: the gradient all-reduce of DDP, overlapped with backward. Gradients are packed into
// buckets (reverse registration order, capped size); a post hook on each parameter's gradient
// accumulator marks it ready, and a bucket's asynchronous all-reduce starts as soon as it and every
// earlier bucket are complete, while backward goes on. finalize() waits and writes the averaged
// gradients back. Knows no file and no config: parameters, a Communicator and options.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/comm/communicator.hpp"
#include "mnddp/ddp/bucketing.hpp"
#include "mnddp/ddp/gradient_shards.hpp"

namespace mnddp {

struct ReducerOptions {
  BucketLimits limits;
  // Mark parameters that the forward pass did not use as ready when backward starts (found by
  // walking the autograd graph from the loss), so their buckets are not held back until finalize();
  // and agree across ranks (one small all-reduce) on which parameters no rank used since the last
  // synchronised step: their gradients are left undefined, so the optimizer skips them, as
  // PyTorch's DDP does. Without it every parameter is averaged (absent gradients as zeros).
  bool find_unused_parameters = false;
  GradCompression compression = GradCompression::None;
  // The caller multiplied the loss by 1/world_size (DistributedDataParallel::scale_loss), so the
  // gradients arrive pre-divided and buckets are summed: one pass over the gradients less per step.
  bool loss_prescaled = false;
  // ZeRO-2 (--zero 2): each bucket is reduce-scattered instead of all-reduced, and a rank keeps only
  // its chunk of it (shards()); parameters hold no gradient after finalize(). Bucket buffers exist
  // only while their collective runs (gradient_shards.hpp).
  bool shard_gradients = false;
  // Buckets start during backward as they fill (PyTorch's overlap). Off: every bucket starts in
  // finalize(), in plan order. For a model whose layers also communicate during backward on the same
  // communicator (SyncBatchNorm) while ranks may differ in which parameters they use
  // (find_unused_parameters): a rank that did not use a parameter would complete its bucket at
  // another point between the layers' collectives than a rank that did, and the two would issue
  // their collectives in different orders (F10 of the GPU review).
  bool overlap = true;
};

// Timings of the last synchronised step, for benchmarks and the log.
struct ReducerStats {
  std::size_t buckets_launched_in_backward = 0;  // started before finalize(): overlapped
  double finalize_wait_s = 0.0;                  // time finalize() blocked the host on communication
  // When the first bucket of the last synchronised backward was handed to the communicator (as the
  // host saw it): the moment this rank became ready to communicate (straggler blame).
  std::chrono::steady_clock::time_point first_bucket_ready;
};

class Reducer {
 public:
  Reducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, Communicator& comm,
          ReducerOptions options = {});
  ~Reducer();  // removes the hooks
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Call before loss.backward() on a synchronised step (needed for find_unused_parameters).
  void prepare_for_backward(const at::Tensor& loss);
  // After backward: completes every bucket and replaces each gradient with the mean over ranks.
  // A parameter's contribution is whatever gradient it holds, accumulated over the no_sync
  // micro-steps too; one that holds none contributes zeros, so no rank waits for it. With
  // find_unused_parameters, a parameter no rank used since the last synchronised step is left
  // without a gradient.
  void finalize();

  // Clears every gradient before a step (sets it to none; torch's Optimizer::zero_grad would
  // detach_() bucket views in place, which views do not allow).
  void zero_grad();

  // no_sync: while disabled, backward only accumulates gradients locally and finalize() does nothing.
  void set_sync(bool enabled);
  bool sync_enabled() const { return sync_; }

  const std::vector<std::vector<std::size_t>>& bucket_members() const { return plan_; }
  // The parameters it reduces (the trainable ones, in registration order) and their names.
  const std::vector<at::Tensor>& parameters() const { return params_; }
  const std::vector<std::string>& names() const { return names_; }
  // shard_gradients: this rank's chunks of the averaged gradients; nullptr otherwise.
  const GradientShards* shards() const { return shards_.get(); }
  // After finalize(): whether no rank used parameter `index` since the previous synchronised step
  // (find_unused_parameters), so that it has no gradient and the optimizer leaves it alone.
  bool unused_everywhere(std::size_t index) const { return unused_everywhere_[index]; }
  const ReducerStats& last_stats() const { return stats_; }
  // Seconds the last synchronised step's collectives ran, summed (queueing excluded). Waits for them
  // to complete: for benchmarks, not for the training loop.
  double last_comm_seconds();

  // Called by the gradient-accumulator hooks.
  void mark_ready(std::size_t index);

  // mnddp plan: each parameter's gradient-ready time of the last backward pass goes to `times`
  // (resized to parameters().size(); nullptr stops it). Every backward, synchronised or not.
  void log_ready_times(std::vector<std::chrono::steady_clock::time_point>* times);
  // Each parameter's bucket key (dtype and device) and gradient bytes, as the plan groups them.
  const std::vector<int>& bucket_keys() const { return keys_; }
  const std::vector<std::size_t>& gradient_bytes() const { return bytes_; }

 private:
  struct Bucket;
  void begin_step();  // caller holds mutex_
  void stage_gradient(std::size_t index, const at::Tensor* grad);
  // Stages the gradient the parameter holds now (from this or earlier no_sync backward passes), or
  // zeros when it holds none.
  void stage_current_gradient(std::size_t index);
  // find_unused_parameters: marks ready (and stages) the parameters the loss's graph does not reach.
  void mark_unreached_ready(const at::Tensor& loss);
  // find_unused_parameters: all-reduces which parameters some rank used (comm, blocking); true
  // for each parameter no rank used.
  std::vector<bool> globally_unused();
  // finalize() on one rank without compression (solo_): only the unused-parameter outcomes.
  void finalize_alone();
  void warn_missing_once(std::size_t first, std::size_t count);  // without find_unused_parameters
  void launch_complete_buckets();
  void launch(Bucket& bucket);
  // Waits for a launched bucket where its result is used next (its stream, or the host) and brings a
  // staged one back to the device.
  void complete(Bucket& bucket);
  // shard_gradients: keeps the chunks of the launched buckets whose reduce-scatter has finished
  // (all of them, waiting, with `wait`) and returns their buffers to the pool.
  void release_finished_buckets(bool wait);
  void release_oldest_bucket();  // waits for it

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<std::vector<std::size_t>> plan_;
  std::vector<std::size_t> bytes_;  // per parameter, what plan_ was made from
  std::vector<int> keys_;
  std::vector<std::chrono::steady_clock::time_point>* ready_times_ = nullptr;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;               // parameter -> bucket
  std::vector<std::size_t> slot_of_;                 // parameter -> offset in its bucket (elements)
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps the hooked grad accumulators alive
  std::vector<std::uintptr_t> hook_keys_;

  std::mutex mutex_;
  bool solo_ = false;    // one rank, no compression: gradients are never staged (see the constructor)
  bool staged_ = false;  // a host communicator with gradients on a GPU: buckets copied through pinned memory
  bool sync_ = true;
  bool step_active_ = false;
  std::vector<bool> ready_;
  // Parameters whose gradient hook fired since the last synchronised step, no_sync steps included.
  std::vector<bool> locally_used_;
  at::Tensor used_map_;  // int32 [parameters], in the communicator's memory: the globally-unused vote
  std::size_t next_launch_ = 0;
  std::size_t next_release_ = 0;  // shard_gradients: buckets before it have given back their buffers
  std::unique_ptr<GradientShards> shards_;
  std::vector<bool> unused_everywhere_;
  bool warned_missing_ = false;
  ReducerStats stats_;
  std::vector<std::shared_ptr<CommWork>> last_works_;  // the last synchronised step's, for last_comm_seconds()
};

}  // namespace mnddp
