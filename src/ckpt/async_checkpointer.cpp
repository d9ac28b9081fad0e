// A checkpoint commit running beside training.
#include "mnddp/ckpt/async_checkpointer.hpp"

#include <utility>

namespace mnddp {

AsyncCheckpointer::AsyncCheckpointer(const std::string& directory, int keep_last, MPI_Comm parent)
    : comm_(parent, "checkpoint"), manager_(directory, keep_last, comm_, comm_.handle()) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointer::start(std::int64_t step, std::uint64_t expected_bytes, Write write, Done done) {
  wait();
  thread_ = std::thread([this, step, expected_bytes, write = std::move(write), done = std::move(done)] {
    try {
      const std::string path = manager_.save(step, expected_bytes, write);
      done(path);
    } catch (...) {
      failure_ = std::current_exception();
    }
  });
}

void AsyncCheckpointer::wait() {
  if (thread_.joinable()) thread_.join();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace mnddp
