// A checkpoint commit running beside training.
#include "mnddp/ckpt/async_checkpointer.hpp"

#include <utility>

#include "mnddp/device_binding.hpp"
#include "mnddp/observe/timeline.hpp"

namespace mnddp {

AsyncCheckpointer::AsyncCheckpointer(CheckpointManager& manager, MPI_Comm parent)
    : manager_(manager), comm_(parent, "checkpoint", ChannelPace::Background) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointer::start(std::int64_t step, std::uint64_t expected_bytes, Write write, Done done) {
  run([this, step, expected_bytes, write = std::move(write), done = std::move(done)](MpiComm& comm) {
    done(manager_.save(step, expected_bytes, write, comm));
  });
}

void AsyncCheckpointer::run(Job job) {
  wait();
  running_ = true;
  thread_ = std::thread([this, job = std::move(job)] {
    try {
      bind_rank_device();  // nothing here should touch CUDA, but if anything does, on our device
      timeline::name_this_thread("checkpoint writer", /*shared=*/true);  // one commit at a time: one track
      job(comm_);
    } catch (...) {
      failure_ = std::current_exception();
    }
    running_ = false;
  });
}

void AsyncCheckpointer::wait() {
  if (thread_.joinable()) thread_.join();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace mnddp
