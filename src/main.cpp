// mnddp: the trainer's command line. `mnddp train [options]` under mpirun or srun.
// Every error reaches the one catch below: agreed (collective) errors end all ranks cleanly with one
// message from rank 0; an error on one rank alone ends the job through Runtime::abort_all.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "mnddp/build_config.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/export.hpp"
#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/diagnose/incident_command.hpp"
#include "mnddp/diagnose/incident_signals.hpp"
#include "mnddp/diagnose/preflight.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "mnddp/host_allocator.hpp"
#include "mnddp/log.hpp"
#include "mnddp/observe/startup_breakdown.hpp"
#include "mnddp/observe/trace_merge.hpp"
#include "mnddp/plan/plan_command.hpp"
#include "mnddp/preemption.hpp"
#include "mnddp/program_options_message.hpp"
#include "mnddp/runtime.hpp"
#include "mnddp/train/checkpoint_evaluation.hpp"
#include "mnddp/train/determinism.hpp"
#include "mnddp/train/device.hpp"
#include "mnddp/train/trainer.hpp"
#include "mnddp/version_report.hpp"
#include "mnddp/watchdog.hpp"

namespace {

// Destructors and MPI_Finalize wait on other ranks; a rank that is gone must not make us wait forever.
constexpr double kShutdownSeconds = 60.0;

using namespace mnddp;

constexpr const char* kUsage =
    "Usage: mnddp <command> [options]\n\n"
    "Commands:\n"
    "  train     train a model data-parallel (run under mpirun -np N or srun --mpi=pmix)\n"
    "  eval      evaluate a checkpoint on validation shards, on any number of ranks\n"
    "            (--checkpoint X [--val-data ...] [any train option to override the checkpoint's])\n"
    "  export    write a checkpoint's model as a file torch.load reads (--checkpoint X --out model.pt)\n"
    "  trace     trace merge DIR: join a --trace directory's per-rank timelines into one file\n"
    "  preflight check devices, data files, the checkpoint directory and the links between ranks before\n"
    "            training (under mpirun or srun, with the train options; exit code 5 and --exclude= hosts\n"
    "            on a failure)\n"
    "  plan      predict the step time, scaling efficiency and memory per GPU on 1 to 128 nodes from a\n"
    "            few steps measured on one rank, and advise bucket size, --zero stage, node count and\n"
    "            checkpoint interval (with the train options; 'mnddp plan --help')\n"
    "  incident  incident FILE: explain a failed job from its --incident-file (which rank, doing what)\n"
    "  version   print the versions mnddp was built with\n\n"
    "'mnddp train --help' lists every training option.\n";

// Before MPI starts: whether the launcher (Open MPI, PMIx, PMI, Slurm) made this process rank 0,
// or nothing launched it.
bool launched_as_rank_zero() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  return true;
}

// What rank 0 decided from the command line, broadcast to every rank.
enum class Action : std::int64_t { Train = 0, Help = 1, HelpMarkdown = 2, PrintConfig = 3 };

// Rank 0 parses command line, environment and config file; the others receive the resolved INI, so
// N ranks never read the config file N times, and they cannot disagree about it.
// `base_ini`: the lowest-precedence source (a checkpoint's config, for mnddp eval).
TrainingConfig agree_on_config(Communicator& comm, const std::vector<std::string>& args, Action& action,
                               const std::string& base_ini = {}) {
  std::string ini;
  std::int64_t chosen = 0;
  on_root_then_agree(comm, [&] {
    const ParsedCommandLine parsed = parse_command_line(args, environment_from_process(), base_ini);
    chosen = static_cast<std::int64_t>(parsed.help            ? Action::Help
                                       : parsed.help_markdown ? Action::HelpMarkdown
                                       : parsed.print_config  ? Action::PrintConfig
                                                              : Action::Train);
    ini = to_ini(parsed.config);
  });
  comm.broadcast(&chosen, 1, DType::I64, 0);
  broadcast_string(comm, ini, 0);
  action = static_cast<Action>(chosen);
  return parse_ini_text(ini);
}

void log_rank_table(Communicator& comm, const RankInfo& rank, const Trainer& trainer, int threads) {
  const std::string line =
      fmt::format("rank {}/{} host {} node {}/{} local rank {}/{} device {} backend {} threads {}", rank.rank,
                  rank.world_size, rank.host, rank.node_index, rank.node_count, rank.local_rank, rank.local_size,
                  trainer.device_description(), trainer.backend(), threads);
  const auto lines = allgather_strings(comm, line);
  for (const auto& l : lines) spdlog::info("{}", l);
}

// An error every rank agreed on (a desync, replicas that differ, a NaN loss) ends the job cleanly, and
// is an incident all the same; a bad option or file is not.
void record_agreed_error(const Error& e, bool root) {
  if (e.exit_code() == kExitUsage) return;
  IncidentReport report;
  report.cause = IncidentCause::Error;
  report.reason = e.what();
  report.exit_code = e.exit_code();
  if (IncidentRecorder::write(report) && root) std::fprintf(stderr, "mnddp: %s\n", IncidentRecorder::pointer().c_str());
}

// mnddp export --checkpoint X --out model.pt: serial, no MPI needed.
int export_command(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("mnddp export");
  options.add_options()("help,h", "show this help")("checkpoint", po::value<std::string>()->required(),
                                                    "checkpoint file (step-N.h5)")(
      "out", po::value<std::string>()->required(), "output file for torch.load (e.g. model.pt)")(
      "overwrite", "replace --out if it exists");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).run(), vm);
  if (vm.count("help")) {
    std::printf("Usage: mnddp export --checkpoint step-N.h5 --out model.pt\n%s",
                [&] {
                  std::ostringstream text;
                  text << options;
                  return text.str();
                }()
                    .c_str());
    return kExitOk;
  }
  po::notify(vm);
  const std::string out = vm["out"].as<std::string>();
  std::error_code error;
  if (std::filesystem::exists(out, error) && (vm.count("overwrite") == 0 || std::filesystem::is_directory(out, error)))
    throw UsageError(fmt::format("export: --out '{}' exists; pass --overwrite to replace it", out));
  export_checkpoint(vm["checkpoint"].as<std::string>(), out);
  std::printf("wrote %s\n", vm["out"].as<std::string>().c_str());
  return kExitOk;
}

int train(Runtime& runtime, Watchdog& watchdog, const std::vector<std::string>& args) {
  MpiComm world;
  const RankInfo& rank = runtime.info();
  init_logging({rank.rank, rank.world_size, LogLevel::Info, false});
  on_all_then_agree(world, [&] { runtime.check_launch_environment(environment_from_process()); });

  Action action = Action::Train;
  TrainingConfig config = agree_on_config(world, args, action);
  if (action != Action::Train) {
    if (rank.is_root()) {
      if (action == Action::Help) std::printf("%s", help_text().c_str());
      if (action == Action::HelpMarkdown) std::printf("%s", help_markdown().c_str());
      if (action == Action::PrintConfig) std::printf("%s", to_ini(config).c_str());
    }
    return kExitOk;
  }
  init_logging({rank.rank, rank.world_size, config.log_level, config.log_all_ranks});
  watchdog.set_timeout(config.collective_timeout);
  set_debug_collectives(config.debug_collectives);
  // Incident records (diagnose/incident.hpp): one file, and one run id in it, for every rank.
  std::string run_id = rank.is_root() ? make_run_id() : std::string();
  broadcast_string(world, run_id, 0);
  IncidentRecorder::configure(rank, config.incident_file, run_id);

  if (config.deterministic) make_deterministic();  // before any torch computation, and MKL's first call
  const int threads = configure_threads(config.threads, config.deterministic, rank);
  process_startup().mark("config");
  if (rank.is_root()) spdlog::debug("host memory: {}", host_allocator_name());

  Trainer trainer(config, rank, world);
  IncidentRecorder::set_device(trainer.device_description());
  install_incident_signals();  // after the trainer settled which signals preempt
  log_rank_table(world, rank, trainer, threads);
  const TrainResult result = trainer.run();
  if (rank.is_root()) {
    if (result.already_complete) {
      spdlog::info("training is already complete: resumed at step {} of {} (--epochs, --max-steps); nothing to do",
                   result.steps, result.total_steps);
    } else if (result.evaluated) {
      const double headline = metric_value(result.val_metrics, result.val_headline);
      spdlog::info("done: {} steps, final validation {} {:.4f} ({} samples)", result.steps, result.val_headline,
                   headline, result.val_samples);
      // The headline first, then every metric of the task: lines for scripts to read.
      std::printf("final validation %s: %.4f\n", result.val_headline.c_str(), headline);
      for (const auto& metric : result.val_metrics)
        if (metric.name != result.val_headline)
          std::printf("final validation %s: %.6g\n", metric.name.c_str(), metric.value);
    } else {
      spdlog::info("done: {} steps, final training loss {:.4f} (no --val-data)", result.steps, result.last_train_loss);
    }
    std::fflush(stdout);
  }
  return result.preempted ? kExitPreempted : kExitOk;
}

// The value of --checkpoint (or --checkpoint=X), removed from `args`; throws when it is missing.
std::string take_checkpoint_option(std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].starts_with("--checkpoint=")) {
      std::string path = args[i].substr(std::string("--checkpoint=").size());
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      return path;
    }
    if (args[i] == "--checkpoint" && i + 1 < args.size()) {
      std::string path = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i + 2));
      return path;
    }
  }
  throw UsageError(
      "mnddp eval: --checkpoint PATH is needed (a step-N.h5 file, or a checkpoint directory for its "
      "newest valid checkpoint)");
}

// mnddp eval --checkpoint X [train options]: the checkpoint's config, overridden by the options.
int evaluate(Runtime& runtime, Watchdog& watchdog, std::vector<std::string> args) {
  MpiComm world;
  const RankInfo& rank = runtime.info();
  init_logging({rank.rank, rank.world_size, LogLevel::Info, false});
  const bool help = std::ranges::any_of(args, [](const std::string& a) { return a == "--help" || a == "-h"; });
  if (help) {
    if (rank.is_root())
      std::printf(
          "Usage: mnddp eval --checkpoint PATH [--val-data SHARDS] [train options]\n\n"
          "Rebuilds the model from the config stored in the checkpoint (PATH: a step-N.h5 file, or a checkpoint\n"
          "directory for its newest valid checkpoint), reads its parameters and buffers, and prints the task's\n"
          "validation metrics. Any 'mnddp train' option overrides the checkpoint's (--val-data, --batch-size,\n"
          "--device, ...); run it on any number of ranks.\n");
    return kExitOk;
  }
  std::string checkpoint;
  on_all_then_agree(world, [&] { checkpoint = take_checkpoint_option(args); });
  std::error_code error;
  if (std::filesystem::is_directory(checkpoint, error)) {
    const std::string directory = checkpoint;
    checkpoint = CheckpointManager::resolve_resume(world, directory, ResumeFrom{});
    on_all_then_agree(world, [&] {
      if (checkpoint.empty())
        throw UsageError(fmt::format("--checkpoint '{}': no valid checkpoint in this directory", directory));
    });
  }
  Action action = Action::Train;
  TrainingConfig config = agree_on_config(world, args, action, read_checkpoint_config(checkpoint, world));
  init_logging({rank.rank, rank.world_size, config.log_level, config.log_all_ranks});
  watchdog.set_timeout(config.collective_timeout);
  set_debug_collectives(config.debug_collectives);
  if (config.deterministic) make_deterministic();
  configure_threads(config.threads, config.deterministic, rank);

  const CheckpointEvaluation eval = evaluate_checkpoint(config, checkpoint, rank, world);
  if (rank.is_root()) {
    std::string summary;
    for (const auto& metric : eval.metrics)
      summary += fmt::format("{}{} {:.6g}", summary.empty() ? "" : ", ", metric.name, metric.value);
    spdlog::info("'{}' (step {}) on {} samples, {} ranks, device {}: {}", checkpoint, eval.step, eval.samples,
                 rank.world_size, eval.device, summary);
    // As `mnddp train` ends: the headline first, then every metric, for scripts to read.
    std::printf("validation %s: %.4f\n", eval.headline.c_str(), metric_value(eval.metrics, eval.headline));
    for (const auto& metric : eval.metrics)
      if (metric.name != eval.headline) std::printf("validation %s: %.6g\n", metric.name.c_str(), metric.value);
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  process_startup().mark("libraries");  // from the process's start: the dynamic loader's work
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::printf("%s", kUsage);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "version" || args[0] == "--version") {
    std::printf("%s", version_report(host_allocator_name()).c_str());
    return kExitOk;
  }
  if (args[0] == "export") {
    try {
      h5_silence_default_errors();
      return export_command({args.begin() + 1, args.end()});
    } catch (const boost::program_options::error& e) {
      std::fprintf(stderr, "mnddp: error: export: %s\n", program_options_message(e).c_str());
      return kExitUsage;
    } catch (const Error& e) {
      std::fprintf(stderr, "mnddp: error: %s\n", e.what());
      return e.exit_code();
    }
  }
  if (args[0] == "incident") {
    try {
      return incident_command({args.begin() + 1, args.end()});
    } catch (const Error& e) {
      std::fprintf(stderr, "mnddp: error: %s\n", e.what());
      return e.exit_code();
    } catch (const std::exception& e) {  // an input that got past the record checks: a message, not terminate
      std::fprintf(stderr, "mnddp: error: mnddp incident: %s\n", e.what());
      return kExitFailure;
    }
  }
  if (args[0] == "trace") {
    try {
      return trace_command({args.begin() + 1, args.end()});
    } catch (const Error& e) {
      std::fprintf(stderr, "mnddp: error: %s\n", e.what());
      return e.exit_code();
    }
  }
  if (args[0] != "train" && args[0] != "eval" && args[0] != "preflight" && args[0] != "plan") {
    std::fprintf(stderr, "mnddp: error: unknown command '%s' (try 'mnddp --help')\n", args[0].c_str());
    return kExitUsage;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  // Help needs no MPI: it works on a login node without srun, and help2man builds the man pages from it.
  for (const auto& a : args) {
    if (a != "--help" && a != "-h" && a != "--help-markdown") continue;
    const std::string text = command == "plan"        ? plan_usage()
                             : command == "preflight" ? preflight_usage()
                             : a == "--help-markdown" ? help_markdown()
                                                      : help_text();
    if (launched_as_rank_zero()) std::printf("%s", text.c_str());  // once under mpirun or srun
    return kExitOk;
  }

  Activity::name_thread("main");
  hold_preemption_signals(TrainingConfig{}.preempt_signals);  // a warning during start-up must not kill the rank
  std::optional<Runtime> runtime;
  std::optional<Watchdog> watchdog;  // destroyed before the runtime finalizes MPI
  try {
    runtime.emplace(argc, argv);
    process_startup().mark("MPI init");
    // Until the config is agreed, the default timeout guards start-up (a rank that never arrives).
    watchdog.emplace(runtime->info(), TrainingConfig{}.collective_timeout);
    h5_silence_default_errors();
    const int code = command == "eval"        ? evaluate(*runtime, *watchdog, args)
                     : command == "preflight" ? preflight_command(*runtime, *watchdog, args)
                     : command == "plan"      ? plan_command(*runtime, *watchdog, args)
                                              : train(*runtime, *watchdog, args);
    IncidentRecorder::withdraw_signal_record();  // the run ended as it should: a SIGTERM's record was no incident
    Watchdog::arm_exit_deadline(kShutdownSeconds, code);
    return code;
  } catch (const Error& e) {
    Watchdog::arm_exit_deadline(kShutdownSeconds, e.exit_code());
    // Agreed errors (and any error in a world of one) end cleanly with one message from rank 0.
    if (!runtime || e.collective() || runtime->info().world_size == 1) {
      const bool root = !runtime || runtime->is_root();
      if (root) std::fprintf(stderr, "mnddp: error: %s\n", e.what());
      record_agreed_error(e, root);
      return e.exit_code();
    }
    Runtime::abort_all(e.what(), e.exit_code());
  } catch (const std::exception& e) {
    Runtime::abort_all(e.what(), kExitFailure);
  }
}
