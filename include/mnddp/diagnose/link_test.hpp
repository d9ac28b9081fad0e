// The pre-flight link test (mnddp preflight): bandwidth between ranks over the training backend, in
// a ring (each rank to the next) and by pairs (rank r with r XOR k, k = 1, 2, 4, ...: the larger k
// cross nodes), every pair of a round at once as training would, after a pass that connects them. A link is slow when
// its bandwidth is under --slow-below times the upper median of its kind (within a host, or between hosts); a rank is
// blamed when most of its pairs, and at least two (or its only one), are slow: a bad node slows every link it has, a
// bad cable only one. Torch-free: the caller brings buffers the backend can use (device memory for NCCL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

struct LinkTestOptions {
  std::size_t bytes = 16u << 20;  // per transfer
  int repeats = 3;                // transfers per round; the median counts
  int pair_rounds = 16;           // hypercube dimensions at most: k = 1, 2, 4, ... below the world size
  int slow_rank = -1;             // testing aid: this rank waits before each of its transfers,
  double slow_delay_s = 0.5;      // at least this long (far above a loaded machine's transfer),
  double slow_factor = 10.0;      // and this many times its longest transfer of the round so far
};

struct LinkSample {
  int from = 0;  // the measuring rank
  int to = 0;    // its partner in the round (in the ring: the rank it sends to)
  bool ring = false;
  double seconds = 0.0;  // median transfer time
};

// Collective over `control` (barriers between rounds) and `comm` (the transfers). Every rank returns
// every rank's samples.
std::vector<LinkSample> measure_links(Communicator& comm, MpiComm& control, const void* send, void* recv,
                                      const LinkTestOptions& options);

struct LinkJudgement {
  struct Link {
    int a = 0, b = 0;
    bool ring = false;
    double gbps = 0.0;
    double median_gbps = 0.0;  // of its kind
    bool same_host = false;
  };
  std::vector<Link> slow;            // links under the threshold
  std::vector<int> blamed_ranks;     // ranks most of whose pairs are slow
  std::vector<std::string> exclude;  // their hosts, once each
  double ring_median_gbps = 0.0, ring_min_gbps = 0.0;
  int ring_min_rank = -1;
  double pair_median_same_host = 0.0, pair_median_cross_host = 0.0;
  int passes = 1;  // 2 when some links looked slow and were measured again
};

// `hosts`: each rank's host (node name). Pure: the unit tests feed it made-up samples.
LinkJudgement judge_links(const std::vector<LinkSample>& samples, const std::vector<std::string>& hosts,
                          std::size_t bytes, double slow_fraction);

// Judges `measure()`'s samples, and when some links look slow measures every link once more and
// judges each by its faster time: a link that met a passing stall (a loaded node, another job's
// burst) is fast the second time, a slow link is slow again. `measure` is collective; every rank
// holds the same samples, so every rank decides alike whether to measure again.
LinkJudgement judge_links_twice(const std::function<std::vector<LinkSample>()>& measure,
                                const std::vector<std::string>& hosts, std::size_t bytes, double slow_fraction);

}  // namespace mnddp
