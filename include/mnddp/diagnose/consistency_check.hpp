// Always-on consistency checks, riding on the log interval's all-reduce (no collective of their own):
//  - every interval, the running hash of every lockstep channel's collective calls (op, bytes, label;
//    collective_tracker.hpp): its minimum and maximum over the ranks differ when some rank issued a
//    call the others did not, in any order or place, even one MPI could not see (same sizes);
//  - every --check-replicas-every intervals and at the run's last one, a fingerprint of the
//    parameters: replicas that drifted (nondeterminism, silent data corruption) differ.
// Every rank sees the same reduced message, so all stop together: one all-gather then names the
// differing ranks and the first differing call, and every rank throws the same Error (exit code 4).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/diagnose/interval_rider.hpp"

namespace mnddp {

class ConsistencyCheck final : public IntervalRider {
 public:
  // `replicas_every`: check the parameters every this many intervals (0: never); `fingerprint`: this
  // rank's parameters' fingerprint (equal on every rank while the replicas are identical).
  ConsistencyCheck(MpiComm& control, std::int64_t replicas_every, std::function<std::uint64_t()> fingerprint);

  void contribute(ReductionMessage& message, const IntervalPoint& at) override;
  void receive(const ReductionMessage& message, const IntervalPoint& at) override;

 private:
  [[noreturn]] void sequences_differ(const IntervalPoint& at);
  [[noreturn]] void replicas_differ(const IntervalPoint& at);

  MpiComm& control_;
  std::int64_t replicas_every_;
  std::function<std::uint64_t()> fingerprint_;
  std::int64_t intervals_ = 0;
  std::uint64_t sequence_hash_ = 0;
  std::uint64_t parameter_hash_ = 0;
  bool parameters_checked_ = false;  // in the interval being reduced
  ReductionMessage::Slot sequence_slot_ = 0;
  ReductionMessage::Slot parameter_slot_ = 0;
  std::int64_t last_sequence_agreed_ = -1;    // the step of the last check that agreed; -1: none yet
  std::int64_t last_parameters_agreed_ = -1;  // in this invocation
};

// "0-3, 5, 7-9": a sorted list of ranks, runs collapsed.
std::string rank_ranges(const std::vector<int>& ranks);

// Ranks grouped by a value they reported, the largest group first (ties: the lowest rank first).
std::vector<std::vector<int>> group_ranks(const std::vector<std::uint64_t>& value_of_rank);

// The first call where the ranks' recorded sequences on one channel part, from each rank's history
// (collective_tracker.hpp's ring buffer); "" when the histories do not reach back to it.
struct ChannelHistory {
  std::uint64_t started = 0;
  std::vector<CollectiveHistoryEntry> calls;  // oldest first
};
std::string first_difference(const std::string& channel, const std::vector<ChannelHistory>& of_rank);

}  // namespace mnddp
