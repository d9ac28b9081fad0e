// Checkpoint commits on a thread of their own (--checkpoint-async): the trainer copies the state to
// host memory at a step boundary and goes on training while this thread writes, commits and
// prunes through the run's one CheckpointManager, with a communicator of its own (so its
// collectives never interleave with training's) and the same atomic-commit rules as a synchronous
// save. One commit at a time: starting the next one, a preemption stop and the end of training wait
// for the one in flight. A commit may also be any job run with the thread's communicator (the
// node-local level's write, then its drain to --checkpoint-dir).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

class AsyncCheckpointer {
 public:
  // Collective over `parent` (duplicates it). `manager` must outlive this object.
  AsyncCheckpointer(CheckpointManager& manager, MPI_Comm parent);
  ~AsyncCheckpointer();  // joins a commit still in flight; its failure, if any, is lost
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  using Write = std::function<void(ParallelCheckpointWriter&)>;
  using Done = std::function<void(const std::string& path)>;

  // Every rank, same step: waits for the commit in flight (see wait), then starts this one.
  // `write` must own (or share) everything it writes; `done` runs on the thread after the commit.
  void start(std::int64_t step, std::uint64_t expected_bytes, Write write, Done done);
  // Every rank, in the same order: waits for the commit in flight, then runs `job` on the thread
  // with the thread's communicator. `job` must own (or share) everything it touches.
  using Job = std::function<void(MpiComm& comm)>;
  void run(Job job);
  // Every rank: returns when no commit is in flight. A failed commit failed alike on every rank
  // (the manager agrees on it), so every rank rethrows the same collective Error here.
  void wait();
  bool busy() const { return thread_.joinable(); }
  // This rank's view: is a commit still being written (not merely unjoined)? Ranks differ; agree first.
  bool running() const { return running_.load(); }

 private:
  CheckpointManager& manager_;
  MpiComm comm_;
  std::thread thread_;
  std::exception_ptr failure_;
  std::atomic<bool> running_{false};
};

}  // namespace mnddp
