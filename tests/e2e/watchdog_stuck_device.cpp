// A rank whose device is wedged, for e2e/watchdog_stuck_device.sh (F3 of the GPU review). Every rank
// opens a collective record that never finishes, and then, by the mode in argv[1]:
//   probe   the record's completion probe (a CUDA event query) never returns;
//   health  a health check (NCCL's asynchronous-error query) never returns;
//   hook    the abort hook (ncclCommAbort) never returns.
// The watchdog must still time the record out on its deciding thread and the rank must still exit,
// with kExitHang, well within the script's deadline; before the fix the probe and the health check
// ran on that thread and it never decided, and a hanging hook kept the rank alive for ever.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/health_checks.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/watchdog.hpp"

using namespace mnddp;

namespace {

[[noreturn]] void block_for_ever() {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "probe" && mode != "health" && mode != "hook") {
    std::fprintf(stderr, "usage: watchdog_stuck_device probe|health|hook\n");
    return 2;
  }
  Watchdog watchdog(runtime.info(), /*timeout_s=*/2.0);
  CollectiveTracker tracker("nccl");
  if (mode == "hook") Runtime::add_abort_hook([] { block_for_ever(); });
  if (mode == "health") add_health_check([]() -> std::optional<std::string> { block_for_ever(); });
  tracker.begin("allreduce", 4096, std::string("a collective on a wedged device"), [mode] {
    if (mode == "probe") block_for_ever();
    return false;
  });
  std::this_thread::sleep_for(std::chrono::seconds(120));
  std::fprintf(stderr, "watchdog_stuck_device: still alive after 120 s\n");
  return 0;
}
