// MPI lifetime, rank topology, launch checks and the single abort path.
#include "mnddp/runtime.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "mnddp/check.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/error.hpp"
#include "mnddp/guarded_thread.hpp"

namespace mnddp {
namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

// Identity for abort messages, readable from any thread once the runtime is up.
std::mutex g_identity_mutex;
std::string g_identity = "rank ?";
std::vector<std::function<void()>> g_abort_hooks;
std::atomic<bool> g_aborting{false};

}  // namespace

std::string RankInfo::where() const { return fmt::format("rank {}@{}", rank, host); }

Runtime::Runtime(int& argc, char**& argv) {
  int provided = MPI_THREAD_SINGLE;
  MNDDP_MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw Error(
        fmt::format("MPI provides thread level {} but mnddp needs MPI_THREAD_MULTIPLE ({}); "
                    "use an MPI built with thread support",
                    provided, MPI_THREAD_MULTIPLE));
  }
  MNDDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &info_.rank));
  MNDDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &info_.world_size));
  info_.host = host_name();

  // Local rank from the processes that share memory with us, not from launcher variables.
  MPI_Comm node = MPI_COMM_NULL;
  MNDDP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info_.rank, MPI_INFO_NULL, &node));
  MNDDP_MPI_CHECK(MPI_Comm_rank(node, &info_.local_rank));
  MNDDP_MPI_CHECK(MPI_Comm_size(node, &info_.local_size));

  // Node leaders (local rank 0) number the nodes in world-rank order and tell their node.
  const int is_leader = info_.local_rank == 0 ? 1 : 0;
  MPI_Comm leaders = MPI_COMM_NULL;
  MNDDP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, is_leader, info_.rank, &leaders));
  MNDDP_MPI_CHECK(MPI_Comm_rank(leaders, &info_.node_index));
  MNDDP_MPI_CHECK(MPI_Comm_size(leaders, &info_.node_count));
  MNDDP_MPI_CHECK(MPI_Bcast(&info_.node_index, 1, MPI_INT, 0, node));
  MNDDP_MPI_CHECK(MPI_Bcast(&info_.node_count, 1, MPI_INT, 0, node));
  MNDDP_MPI_CHECK(MPI_Comm_free(&leaders));
  MNDDP_MPI_CHECK(MPI_Comm_free(&node));

  std::lock_guard lock(g_identity_mutex);
  g_identity = info_.where();
}

Runtime::~Runtime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_aborting.load()) MPI_Finalize();
}

void Runtime::check_launch_environment(const Environment& env) const {
  // srun sets SLURM_NTASKS for every task; mpirun inside an allocation may not launch that many,
  // so only a step (SLURM_STEP_ID present, i.e. we were started by srun) is held to it.
  const auto tasks = env_int(env, "SLURM_NTASKS");
  const bool srun_step = env.count("SLURM_STEP_ID") > 0 && env.count("SLURM_PROCID") > 0;
  if (!tasks && env.count("SLURM_NTASKS") > 0 && info_.is_root())
    spdlog::warn("SLURM_NTASKS='{}' is not a number: the check of the MPI world against Slurm's task count is skipped",
                 env_value(env, "SLURM_NTASKS").value_or(""));
  if (srun_step && tasks && *tasks != info_.world_size) {
    throw UsageError(fmt::format(
        "SLURM_NTASKS={} but MPI sees a world of {} (SLURM_PROCID={}): srun started the tasks without a working "
        "PMI connection, so each one thinks it is alone. Use 'srun --mpi=pmix' (see docs/SLURM.md)",
        *tasks, info_.world_size, env_value(env, "SLURM_PROCID").value_or("?")));
  }
}

void Runtime::add_abort_hook(std::function<void()> hook) {
  std::lock_guard lock(g_identity_mutex);
  g_abort_hooks.push_back(std::move(hook));
}

void Runtime::arm_exit_deadline(double seconds, int exit_code) {
  std::thread([seconds, exit_code] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::fprintf(stderr, "mnddp: fatal: the process did not finish shutting down within %.0f s; exiting\n", seconds);
    std::fflush(stderr);
    std::_Exit(exit_code);
  }).detach();
}

void Runtime::abort_all(const std::string& reason, int exit_code) {
  // Once: two threads can decide at once (the watchdog's timeout, its device prober's health check,
  // the main thread's error). The second waits for the first's exit, bounded by the deadline.
  if (g_aborting.exchange(true)) {
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  arm_exit_deadline(kAbortDeadlineSeconds, exit_code);
  std::vector<std::function<void()>> hooks;
  std::string identity;
  {
    std::lock_guard lock(g_identity_mutex);
    hooks = g_abort_hooks;
    identity = g_identity;
  }
  std::fprintf(stderr, "[%s] mnddp: fatal: %s\n", identity.c_str(), reason.c_str());
  std::fflush(stderr);
  // This rank's incident record (unless one is written already), then the others'. A rank whose
  // record another rank asked for asks too: its MPI_Abort would otherwise end the job while a slower
  // rank still writes the record the first one waits for.
  IncidentReport report;
  report.reason = reason;
  report.exit_code = exit_code;
  IncidentRecorder::write(report);
  if (IncidentRecorder::written()) IncidentRecorder::ask_peers(reason, exit_code);
  if (IncidentRecorder::written()) {
    std::fprintf(stderr, "[%s] mnddp: %s\n", identity.c_str(), IncidentRecorder::pointer().c_str());
    std::fflush(stderr);
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) {
    try {
      (*it)();
    } catch (...) {
      // Already on the way out: a failing hook must not stop the abort.
    }
  }
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

std::string escaped_exception_reason(const char* what, std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    return fmt::format("internal error: an exception left the {} thread: {}", what, e.what());
  } catch (...) {
    return fmt::format("internal error: an exception of unknown type left the {} thread", what);
  }
}

}  // namespace mnddp
