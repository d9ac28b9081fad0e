// The injected faults, at their named points.
#include "mnddp/fault/fault_hooks.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <thread>

#include "mnddp/diagnose/activity.hpp"
#include "mnddp/error.hpp"
#include "mnddp/fault/fault_actions.hpp"

namespace mnddp {
namespace {

// Each frame keeps a page live past the call, so neither the optimiser nor tail calls flatten it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winfinite-recursion"  // the point of the fault
[[gnu::noinline]] std::uint64_t overflow_the_stack(std::uint64_t depth) {
  volatile char page[4096];
  page[depth % sizeof(page)] = static_cast<char>(depth);
  return overflow_the_stack(depth + 1) + page[(depth * 7) % sizeof(page)];
}
#pragma GCC diagnostic pop

// The null store is the point: UBSan (scripts/asan.sh) would end the process with its own report
// instead of the SIGSEGV the fault's tests expect.
[[gnu::noinline]] __attribute__((no_sanitize("null"))) void write_through_null() {
  static volatile std::uintptr_t address = 0;  // volatile: the compiler cannot see the null, nor drop the store
  *reinterpret_cast<volatile int*>(address) = 1;
}

}  // namespace

void FaultHooks::announce(const std::string& what) const { announce_fault(plan_, rank_.where(), what); }

void FaultHooks::at_step_start(std::int64_t step) const {
  if (!plan_.active()) return;
  if (plan_.hits(FaultKind::Crash, step, rank_.rank)) {
    announce("killing this rank (SIGKILL)");
    std::raise(SIGKILL);
  }
  if (plan_.hits(FaultKind::Segfault, step, rank_.rank)) {
    announce("writing through a null pointer (SIGSEGV)");
    write_through_null();
  }
  if (plan_.hits(FaultKind::StackOverflow, step, rank_.rank)) {
    announce("recursing without end (a stack overflow)");
    overflow_the_stack(0);
  }
  if (plan_.hits(FaultKind::Hang, step, rank_.rank)) {
    announce("this rank stops before the step's collectives");
    const Activity hung("the injected hang");
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (plan_.hits(FaultKind::Stall, step, rank_.rank)) {
    announce("this rank enters a collective that never completes (a stuck network)");
    stall_in_a_collective();
  }
  if (plan_.hits_from(FaultKind::Slow, step, rank_.rank)) {
    if (plan_.step == step) announce("this rank sleeps 0.5 s in every step from now on");
    const Activity sleeping("the injected slow fault's 0.5 s sleep");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

bool FaultHooks::poisons_loss(std::int64_t step) const {
  if (!plan_.hits(FaultKind::NanLoss, step, rank_.rank)) return false;
  announce("this rank's loss becomes NaN");
  return true;
}

bool FaultHooks::desyncs_interval(std::int64_t first_step, std::int64_t last_step) const {
  if (plan_.kind != FaultKind::Desync || plan_.step < first_step || plan_.step > last_step) return false;
  if (plan_.rank >= 0 && plan_.rank != rank_.rank) return false;
  announce(
      "this rank issues the interval's metrics all-reduce from another place in the program (same size, "
      "another label)");
  return true;
}

bool FaultHooks::drifts_replica(std::int64_t step) const {
  if (!plan_.hits(FaultKind::ReplicaDrift, step, rank_.rank)) return false;
  announce("this rank flips the top mantissa bit of its first parameter's first element after the update");
  return true;
}

std::function<void(std::int64_t)> FaultHooks::loader_hook(std::int64_t first_step, int grad_accum_steps) const {
  if (plan_.kind != FaultKind::LoaderException) return {};
  // Batch b of this epoch's loader feeds step first_step + b / grad_accum_steps + 1.
  return [plan = plan_, rank = rank_.rank, first_step, grad_accum_steps](std::int64_t batch) {
    if (plan.hits(FaultKind::LoaderException, first_step + batch / grad_accum_steps + 1, rank))
      throw Error(fmt::format("injected fault {}: the data loader's thread failed on rank {}", plan.spec(), rank));
  };
}

void FaultHooks::before_checkpoint_write(std::int64_t step, const std::string& directory) const {
  if (plan_.hits(FaultKind::CheckpointStall, step, rank_.rank)) {
    announce("this rank stops inside the checkpoint write (a hung file system)");
    const Activity stalled("the injected checkpoint stall");
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (!plan_.hits(FaultKind::CheckpointFill, step, rank_.rank)) return;
  announce("filling the checkpoint file system");
  fill_file_system(directory);
}

void FaultHooks::after_checkpoint_arrays(std::int64_t step) const {
  // The worst moment: after the arrays are written, before the commit.
  if (plan_.hits(FaultKind::CheckpointKill, step, rank_.rank)) {
    announce("SIGKILL in the middle of the checkpoint write");
    std::raise(SIGKILL);
  }
  if (plan_.hits(FaultKind::CheckpointFail, step, rank_.rank))
    throw Error(fmt::format("injected fault checkpoint-fail at step {} on rank {}", step, rank_.rank));
}

void FaultHooks::after_checkpoint_commit(std::int64_t step, const std::string& path) const {
  if (!plan_.hits(FaultKind::CheckpointCorrupt, step, rank_.rank) || !rank_.is_root()) return;
  announce(fmt::format("flipping one byte of '{}' after its commit", path));
  corrupt_checkpoint(path);
}

}  // namespace mnddp
