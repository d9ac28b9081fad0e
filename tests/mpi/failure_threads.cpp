// Every thread a failing rank has, at once, in the torch-free library: the training loop's stand-in
// (a loader batch and an allreduce each step), the loader's reading thread, the asynchronous
// checkpoint writer committing every other step, the watchdog and its answering channel, and the
// incident recorder with its signal handlers. tests/mpi/failure_threads.sh runs it on 2 ranks, and
// scripts/tsan.sh under ThreadSanitizer (label torch-free): the races this finds are the ones only a
// failure with everything in flight reaches.
//
// Usage: test_failure_threads MODE DIR [STEPS]
//   clean   STEPS steps (default 24), every rank; exit 0 with a committed checkpoint.
//   hang    rank 1 stops before the allreduce of step 5, its commit and loader still running: the
//           watchdog (2 s) ends every rank with exit 4 and a record from each.
//   error   rank 1's loader throws before batch 5: rank 1 ends the job through abort_all (exit 1)
//           while rank 0 waits in the allreduce, a record from each.
//   stall   every rank enters a call at step 5 that never finishes; the last rank writes its pid to
//           DIR/stalled.pid there, so the driver can freeze it as a rank too slow to answer (a loaded node):
//           the watchdogs end the job with exit 4 and a record from each rank, the frozen one's too.
//   verify  one rank: the newest checkpoint in DIR/ckpt verifies (exit 0), or none does (exit 1).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mnddp/ckpt/async_checkpointer.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/resume_from.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/diagnose/incident_signals.hpp"
#include "mnddp/error.hpp"
#include "mnddp/exit_codes.hpp"
#include "mnddp/progress.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/watchdog.hpp"

using namespace mnddp;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kFaultStep = 5;
constexpr std::int64_t kParameters = 4096;

[[noreturn]] void block_for_ever() {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Inside a tracked call that never finishes, as a stuck network leaves every rank.
[[noreturn]] void stall(const RankInfo& rank, const std::string& dir) {
  static CollectiveTracker channel("stalled");
  channel.begin("allreduce", sizeof(float), std::string("the stalled call"));
  if (rank.rank == rank.world_size - 1) {
    const std::string pid_file = dir + "/stalled.pid";
    if (std::FILE* file = std::fopen((pid_file + ".tmp").c_str(), "w")) {
      std::fprintf(file, "%d\n", static_cast<int>(::getpid()));
      std::fclose(file);
      fs::rename(pid_file + ".tmp", pid_file);  // whole, or not there
    }
  }
  block_for_ever();
}

// Rank 0 writes the shards; every rank scans them (collective) and reads its own stride.
H5Reader open_data(MpiComm& world, const std::string& dir) {
  const std::string data = dir + "/data";
  if (world.rank() == 0) {
    SynthOptions synth;
    synth.out_dir = data;
    synth.train_samples = 512;
    synth.val_samples = 16;
    synth.shards = 2;
    synth.shape = {16};
    synth.overwrite = true;
    write_synthetic_classification(synth);
  }
  world.barrier();
  return H5Reader(scan_shards_collective(world, data + "/train_*.h5", "--train-data", "x", "y"));
}

int train(Runtime& runtime, const std::string& mode, const std::string& dir, std::int64_t steps) {
  const RankInfo& rank = runtime.info();
  MpiComm world;
  IncidentRecorder::configure(rank, dir + "/incident.jsonl", "failure-threads");
  install_incident_signals();
  H5Reader reader = open_data(world, dir);
  std::vector<std::int64_t> indices;
  for (std::int64_t i = rank.rank; i < reader.index().num_samples(); i += rank.world_size) indices.push_back(i);
  LoaderOptions options;
  options.prefetch_batches = 2;
  const bool loader_fault = mode == "error" && rank.rank == 1;
  options.before_batch = [loader_fault](std::int64_t batch) {
    if (loader_fault && batch == kFaultStep - 1) throw std::runtime_error("injected loader exception");
  };
  Loader loader(reader, indices, 8, options);
  CheckpointManager manager(dir + "/ckpt", 2, world);
  AsyncCheckpointer async(manager, world.handle());
  std::vector<float> parameters(kParameters, 0.0f);

  progress::Watched watched;
  for (std::int64_t step = 1; step <= steps; ++step) {
    std::optional<HostBatch> batch = loader.next();
    if (!batch) break;
    progress::note();
    float sum = std::accumulate(batch->x.begin(), batch->x.end(), 0.0f);
    if (mode == "hang" && rank.rank == 1 && step == kFaultStep) block_for_ever();
    if (mode == "stall" && step == kFaultStep) stall(rank, dir);
    world.allreduce(&sum, 1, DType::F32, ReduceOp::Sum);
    for (auto& p : parameters) p += sum * 1e-6f;
    if (step % 2 == 0) {
      // The writer owns its copy: the loop goes on changing `parameters`.
      auto state = std::make_shared<const std::vector<float>>(parameters);
      async.start(
          step, state->size() * sizeof(float),
          [state, step](ParallelCheckpointWriter& writer) {
            writer.set_attribute("format_version",
                                 std::to_string(kCheckpointFormatVersion));  // the verifier asks for it
            writer.set_attribute("step", std::to_string(step));
            writer.write({"model/w", DType::F32, {kParameters}, state->data()});
            writer.close();
          },
          [](const std::string&) {});
    }
  }
  async.wait();
  if (rank.is_root())
    std::printf("failure_threads: %s: %lld steps, %zu checkpoints\n", mode.c_str(), static_cast<long long>(steps),
                manager.committed().size());
  return kExitOk;
}

int verify(const std::string& dir) {
  MpiComm world;
  const std::string path = CheckpointManager::resolve_resume(world, dir + "/ckpt", ResumeFrom{});
  std::printf("failure_threads: verify: %s\n", path.empty() ? "no valid checkpoint" : path.c_str());
  return path.empty() ? kExitFailure : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Activity::name_thread("main");
  std::optional<Runtime> runtime;
  std::optional<Watchdog> watchdog;  // destroyed before the runtime finalizes MPI
  const std::string mode = argc > 2 ? argv[1] : "";
  if (mode != "clean" && mode != "hang" && mode != "error" && mode != "stall" && mode != "verify") {
    std::fprintf(stderr, "usage: test_failure_threads clean|hang|error|stall|verify DIR [STEPS]\n");
    return kExitUsage;
  }
  const std::string dir = argv[2];
  const std::int64_t steps = argc > 3 ? std::stoll(argv[3]) : 24;
  try {
    runtime.emplace(argc, argv);
    watchdog.emplace(runtime->info(), 2.0);
    const int code = mode == "verify" ? verify(dir) : train(*runtime, mode, dir, steps);
    Watchdog::arm_exit_deadline(10.0, code);
    return code;
  } catch (const Error& e) {
    if (!runtime || e.collective()) {
      std::fprintf(stderr, "failure_threads: error: %s\n", e.what());
      return e.exit_code();
    }
    Runtime::abort_all(e.what(), e.exit_code());
  } catch (const std::exception& e) {
    Runtime::abort_all(e.what(), kExitFailure);
  }
}
