// The pre-flight link rounds on 4 ranks ("nodes" n1 = ranks 0-1, n2 = ranks 2-3) while the machine's
// load rises after each round's untimed first transfer: every timed transfer of every rank then
// costs 0.12 s more. The injected slow rank (--inject-slow-rank 3) must still stand out, its links
// measured as `slow_factor` times slower than the others, and rank 3 alone be blamed.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/diagnose/link_test.hpp"

using namespace mnddp;

namespace {

// MpiComm (the world's), and a load that rises within a round: measure_links makes one connecting
// transfer per round, then each round an untimed first transfer and `repeats` timed ones. Every
// transfer after a round's first costs `extra_s` more, on every rank alike.
class RisingLoad final : public Communicator {
 public:
  RisingLoad(int rounds, int repeats, double extra_s) : rounds_(rounds), repeats_(repeats), extra_s_(extra_s) {}
  void send_receive(const void* send, int to, void* recv, int from, std::size_t bytes) override {
    const int call = calls_++;
    const bool connecting = call < rounds_;
    const bool first_of_round = !connecting && (call - rounds_) % (repeats_ + 1) == 0;
    if (!connecting && !first_of_round) std::this_thread::sleep_for(std::chrono::duration<double>(extra_s_));
    mpi_.send_receive(send, to, recv, from, bytes);
  }
  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  std::string backend_name() const override { return "rising-load"; }
  void allreduce(void* buffer, std::size_t count, DType dtype, ReduceOp op) override {
    mpi_.allreduce(buffer, count, dtype, op);
  }
  void broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    mpi_.broadcast(buffer, count, dtype, root);
  }
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override {
    mpi_.allgather(send, recv, count, dtype);
  }
  void barrier() override { mpi_.barrier(); }
  std::shared_ptr<CommWork> allreduce_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                            std::optional<CudaStream> producer) override {
    return mpi_.allreduce_async(buffer, count, dtype, op, producer);
  }
  std::shared_ptr<CommWork> reduce_scatter_async(void* buffer, std::size_t count, DType dtype, ReduceOp op,
                                                 std::optional<CudaStream> producer) override {
    return mpi_.reduce_scatter_async(buffer, count, dtype, op, producer);
  }
  std::uint64_t collective_count() const override { return mpi_.collective_count(); }

 private:
  MpiComm mpi_;
  int rounds_, repeats_;
  double extra_s_;
  int calls_ = 0;
};

TEST(LinkRounds, TheSlowRankStandsOutWhenTheLoadRisesAfterTheFirstTransfer) {
  ASSERT_EQ(MpiComm().size(), 4) << "a world of 4 ranks, 2 'nodes' of 2";
  LinkTestOptions options;
  options.bytes = 64u << 10;
  options.repeats = 3;  // the default: the median of three
  options.slow_rank = 3;
  options.slow_factor = 5;     // (10 in preflight) a shorter test, as far from the threshold
  options.slow_delay_s = 0.2;  // the floor alone (0.5 s by default) would hide what is tested here
  // 4 ranks: the ring, then the pairs r^1 (within a node) and r^2 (across).
  RisingLoad comm(/*rounds=*/3, options.repeats, /*extra_s=*/0.12);
  MpiComm control;
  std::vector<char> send(options.bytes), recv(options.bytes);
  const auto samples = measure_links(comm, control, send.data(), recv.data(), options);
  const std::vector<std::string> hosts = {"n1", "n1", "n2", "n2"};
  // preflight's default --slow-below: a link slower than 0.3 of its kind's typical one.
  const LinkJudgement j = judge_links(samples, hosts, options.bytes, 0.3);
  // A delay fixed from the first transfer (0.2 s) made the slow pairs 0.32 s against 0.12 s: 2.7x,
  // not slow enough to judge, and no rank was blamed.
  EXPECT_EQ(j.blamed_ranks, std::vector<int>{3});
  EXPECT_EQ(j.exclude, std::vector<std::string>{"n2"});
}

}  // namespace
