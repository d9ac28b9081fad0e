// The two planes: control messages (strings, agreement, metrics, signatures, flags) must never reach
// the gradient communicator, which on GPUs is NCCL and takes device tensors only (a host pointer
// there is undefined behaviour, hidden on one GPU). On CPU the gradient communicator is wrapped in a
// recorder that lets tensors through (the calls of comm/tensor_comm.hpp's adapters) and records
// every other call; a whole run (DDP set-up, 3 steps of a BatchNorm model, validation, checkpoints)
// must leave the record empty, and the tensor traffic must be there.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <mutex>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/train/trainer.hpp"
#include "test_support.hpp"

using namespace mnddp;

namespace {

// Forwards everything to `inner`; a call that does not come from a tensor adapter is a violation.
class GradientPlaneRecorder final : public Communicator {
 public:
  explicit GradientPlaneRecorder(std::shared_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  bool uses_device_memory() const override { return inner_->uses_device_memory(); }
  std::uint64_t collective_count() const override { return inner_->collective_count(); }

  void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) override {
    record("allreduce", count, dtype);
    inner_->allreduce(buffer, count, dtype, op);
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    record("broadcast", count, dtype);
    inner_->broadcast(buffer, count, dtype, root);
  }
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override {
    record("allgather", count, dtype);
    inner_->allgather(send, recv, count, dtype);
  }
  void barrier() override {
    record("barrier", 0, DType::U8);
    inner_->barrier();
  }
  std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                            std::optional<CudaStream> producer) override {
    record("allreduce_async", count, dtype);
    return inner_->allreduce_async(buffer, count, dtype, op, producer);
  }
  std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                 std::optional<CudaStream> producer) override {
    record("reduce_scatter_async", count, dtype);
    return inner_->reduce_scatter_async(buffer, count, dtype, op, producer);
  }
  std::shared_ptr<CommWork> broadcast_async(void* buffer, std::size_t count, DType dtype, int root,
                                            std::optional<CudaStream> producer) override {
    record("broadcast_async", count, dtype);
    return inner_->broadcast_async(buffer, count, dtype, root, producer);
  }
  std::shared_ptr<CommWork> allgather_async(const void* send, void* recv, std::size_t count, DType dtype,
                                            std::optional<CudaStream> producer) override {
    record("allgather_async", count, dtype);
    return inner_->allgather_async(send, recv, count, dtype, producer);
  }

  std::vector<std::string> violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }
  std::int64_t tensor_calls() const {
    std::lock_guard lock(mutex_);
    return tensor_calls_;
  }

 private:
  void record(const char* op, std::size_t count, DType dtype) {
    std::lock_guard lock(mutex_);
    if (inside_tensor_call()) {
      ++tensor_calls_;
      return;
    }
    violations_.push_back(fmt::format("{} of {} x {} outside a tensor adapter", op, count, dtype_name(dtype)));
  }

  std::shared_ptr<Communicator> inner_;
  mutable std::mutex mutex_;
  std::vector<std::string> violations_;
  std::int64_t tensor_calls_ = 0;
};

}  // namespace

TEST(ControlPlane, NoControlMessageReachesTheGradientCommunicator) {
  MpiComm world;
  ASSERT_GE(world.size(), 2) << "the planes only separate with two or more ranks";
  testing_support::TempDir dir("mnddp-planes");
  std::string data = dir.file("data");
  if (world.is_root()) {
    SynthOptions synth;
    synth.out_dir = data;
    synth.train_samples = 96;
    synth.val_samples = 21;
    synth.shards = 2;
    synth.shape = {1, 6, 6};
    synth.num_classes = 3;
    write_synthetic_classification(synth);
  }
  broadcast_string(world, data, 0);

  TrainingConfig c;
  c.train_data = data + "/train_*.h5";
  c.val_data = data + "/val_*.h5";
  c.model = ModelKind::ConvNet;  // BatchNorm: buffers broadcast every step and before eval/checkpoints
  c.hidden = 4;
  c.layers = 2;
  c.num_classes = 3;
  c.batch_size = 4;
  c.max_steps = 3;
  c.epochs = 1;
  c.metrics_file = "";
  c.threads = 1;
  c.log_interval = 1;  // metrics all-reduced every step (on the control plane)
  c.checkpoint_dir = dir.file("ckpt");
  c.checkpoint_interval = 2;  // one checkpoint in the loop, one at the end
  c.checkpoint_async = false;
  c.bucket_cap_mb = 0.001;  // several buckets
  c.first_bucket_mb = 0.0005;
  broadcast_string(world, c.checkpoint_dir, 0);
  const RankInfo me{world.rank(), world.size(), world.rank(), world.size(), 1, 0, "test"};

  std::shared_ptr<GradientPlaneRecorder> recorder;
  Trainer trainer(c, me, world, [&](std::shared_ptr<Communicator> gradients) {
    recorder = std::make_shared<GradientPlaneRecorder>(std::move(gradients));
    return recorder;
  });
  const TrainResult result = trainer.run();
  EXPECT_EQ(result.steps, 3);
  EXPECT_EQ(result.val_samples, 21);
  ASSERT_TRUE(recorder);

  const auto violations = recorder->violations();
  for (const auto& v : violations)
    ADD_FAILURE() << "rank " << world.rank() << ": control message on the gradient plane: " << v;
  // The gradient plane did carry the model: the initial broadcast, buffers and gradient buckets.
  EXPECT_GT(recorder->tensor_calls(), 3) << "the recorder saw no tensor traffic: is it wired in?";
}
