// What the always-on consistency checks cost, part by part, in one process:
//  - per collective: CollectiveTracker::begin + end as every channel calls them (the running hash and
//    the ring buffer entry included), and the hash chain alone;
//  - per log interval: the lockstep hash over the channels, and the metrics message with the checks'
//    fields against the three metrics alone (encode + combine + decode; the all-reduce stays one call);
//  - per parameter check: the parameter fingerprint of a model-sized set of tensors, host method
//    (XXH3) and device method (weighted sums, run here on the CPU).
// Run with one rank: mpirun -np 1 mnddp-bench-consistency [MiB of parameters, default 100].
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <mpi.h>
#include <xxhash.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/comm/reduction_message.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/parameter_fingerprint.hpp"

using namespace mnddp;
using bench::Clock;

namespace {

template <typename Work>
double ns_per_call(int calls, Work&& work) {
  std::vector<double> rounds;
  for (int round = 0; round < 7; ++round) {
    const auto t = Clock::now();
    for (int i = 0; i < calls; ++i) work(i);
    rounds.push_back(bench::seconds_since(t) / calls * 1e9);
  }
  return bench::median(rounds);
}

double combine_ns(bool with_checks) {
  return ns_per_call(200000, [&](int i) {
    ReductionMessage a, b;
    for (auto* m : {&a, &b}) {
      m->add_sum(i);
      m->add_sum(2.0);
      m->add_sum(3.0);
      if (with_checks) {
        m->add_min_max(static_cast<std::uint64_t>(i));
        m->add_min_max(7);
      }
    }
    auto wire = a.encode();
    auto other = b.encode();
    int one = 1;
    ReductionMessage::combine(other.data(), wire.data(), &one, nullptr);
    a.decode(wire);
  });
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    at::set_num_threads(1);
    const double mib = argc > 1 ? std::atof(argv[1]) : 100.0;
    MpiComm comm;  // the channels a CPU run has: mpi, mpi-async
    CollectiveTracker tracker("bench");
    const std::string label = "gradient bucket 0 (first: fc2.weight)";
    const double tracked = ns_per_call(1000000, [&](int) { tracker.end(tracker.begin("allreduce", 4096, label)); });
    const std::string op = "allreduce";
    std::uint64_t chain = 1;
    const double hash = ns_per_call(1000000, [&](int i) {
      const std::uint64_t bytes = static_cast<std::uint64_t>(i);
      chain = XXH3_64bits_withSeed(op.data(), op.size(), chain);
      chain = XXH3_64bits_withSeed(&bytes, sizeof(bytes), chain);
      chain = XXH3_64bits_withSeed(label.data(), label.size(), chain);
    });
    const double lockstep = ns_per_call(200000, [&](int) { chain ^= CollectiveTracker::lockstep_hash(); });
    const double message_plain = combine_ns(false);
    const double message_checked = combine_ns(true);
    // The incident file's activity board: a phase's scope, and the step's (which formats its number).
    const double phase_scope = ns_per_call(1000000, [&](int) { const Activity phase("forward"); });
    const double step_scope =
        ns_per_call(1000000, [&](int i) { const Activity step(fmt::format("training step {}", i)); });
    fmt::print("per collective: begin+end {:.0f} ns, of which the hash chain {:.0f} ns\n", tracked, hash);
    fmt::print("per activity scope (incident file): a phase {:.0f} ns, the step's with its number {:.0f} ns\n",
               phase_scope, step_scope);
    fmt::print(
        "per interval: lockstep hash over {} channels {:.0f} ns; metrics message {:.0f} ns -> {:.0f} ns with "
        "the checks' fields\n",
        CollectiveTracker::snapshot_all().size(), lockstep, message_plain, message_checked);

    // A model's worth of parameters: 25 tensors, float32.
    const auto elements = static_cast<std::int64_t>(mib * 1024 * 1024 / 4);
    std::vector<at::Tensor> parameters;
    for (int p = 0; p < 25; ++p) parameters.push_back(at::randn({elements / 25}));
    std::vector<double> host, reduced;
    for (int round = 0; round < 5; ++round) {
      auto t = Clock::now();
      chain ^= parameter_fingerprint(parameters, false);
      host.push_back(bench::seconds_since(t));
      t = Clock::now();
      chain ^= reduced_fingerprint(parameters);
      reduced.push_back(bench::seconds_since(t));
    }
    fmt::print(
        "per parameter check, {:g} MiB of float32 parameters: host method (XXH3) {:.3f} ms ({:.1f} GB/s), "
        "device method on the CPU {:.3f} ms\n",
        mib, bench::median(host) * 1e3, mib * 1.048576e-3 / bench::median(host), bench::median(reduced) * 1e3);
    if (chain == 42) fmt::print("\n");  // keeps the work
  }
  MPI_Finalize();
}
