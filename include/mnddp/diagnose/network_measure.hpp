// mnddp preflight --save-network FILE: the cluster's network measured for mnddp plan. For message
// sizes from 8 bytes up to the link test's, every pair of ranks exchanges at once (the link test's
// rounds: within a node, and across nodes with every rank of a node sending), and the median times
// within and across nodes become the profile's measured hops; the smallest size's time is a hop's
// latency, the slope between the two largest its bandwidth. Torch-free, like the link test.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "mnddp/comm/communicator.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/plan/network_profile.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

// Collective over `control` and `comm` (the transfers, over the training backend); `send` and
// `recv` hold `max_bytes`. Every rank returns the same profile.
NetworkProfile measure_network(Communicator& comm, MpiComm& control, const void* send, void* recv,
                               std::size_t max_bytes, const std::vector<std::string>& hosts, const RankInfo& rank,
                               CollectiveLibrary library);

}  // namespace mnddp
