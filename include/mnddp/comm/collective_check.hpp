// --debug-collectives: before each collective on an MPI channel, the ranks exchange what they are
// about to call (op, dtype, count, root, label) and a running hash of every earlier call. A program
// whose ranks have fallen out of step (one skipped an all-reduce, called a broadcast where the others
// all-reduce, or made a call of the same size from another place) then stops with an error (exit
// code 4) naming the first differing call and ranks, instead of
// hanging or silently mixing unrelated buffers. Costs one small all-gather per collective.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

// Process-wide switch, set from the agreed config (the same on every rank, before training).
void set_debug_collectives(bool on);
bool debug_collectives();

// The running state of one channel's check.
struct CollectiveCheck {
  std::string channel;
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a offset basis

  // Collective over `comm`. Throws a collective Error (same text on every rank) on a mismatch.
  void verify(MPI_Comm comm, std::uint64_t seq, const char* op, DType dtype, std::size_t count, int root,
              const std::string& label);
};

}  // namespace mnddp
