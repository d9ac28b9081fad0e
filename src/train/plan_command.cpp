// mnddp plan: a few steps of the real run on one rank, measured, then the scaling plan.
#include "mnddp/plan/plan_command.hpp"

#include <c10/core/CachingDeviceAllocator.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/collective_check.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/ddp/reducer.hpp"
#include "mnddp/device_binding.hpp"
#include "mnddp/error.hpp"
#include "mnddp/exit_codes.hpp"
#include "mnddp/log.hpp"
#include "mnddp/observe/resources.hpp"
#include "mnddp/observe/run_observer.hpp"
#include "mnddp/plan/plan_inputs.hpp"
#include "mnddp/plan/scaling_plan.hpp"
#include "mnddp/program_options_message.hpp"
#include "mnddp/run_program.hpp"
#include "mnddp/train/device.hpp"
#include "mnddp/train/trainer.hpp"
#include "mnddp/watchdog.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1 << 30;

struct PlanOptions {
  std::string network;    // "": h200-nvlink-ib400, or --from's own
  std::string from;       // a plan file to plan again from, without measuring
  int gpus_per_node = 0;  // 0: the network profile's
  int max_nodes = 128;
  double device_memory_gib = 0;  // 0: the measuring device's (a GPU), or the node's memory per rank
  std::int64_t steps = 10;
  std::int64_t warmup = 3;
  std::string json;
  std::string plot;
};

const char* kPlanUsage =
    "Usage: mnddp plan [plan options] [train options]\n\n"
    "Trains a few steps of the run the train options describe, on this one rank, and predicts from\n"
    "them its step time, samples/s, scaling efficiency and memory per rank on 1, 2, 4, ... nodes, with\n"
    "its advice: bucket size, --zero stage, how many nodes stay efficient, the checkpoint interval.\n"
    "  --network NAME|FILE     the cluster's network: a file from 'mnddp preflight --save-network FILE',\n"
    "                          or h200-nvlink-ib400 (default), h100-nvlink-ib400, v100-nvlink-ib100,\n"
    "                          p100-pcie-25gbe (docs/PLAN.md gives their sources)\n"
    "  --gpus-per-node G       ranks a node runs (default: the network's)\n"
    "  --max-nodes N           the largest node count planned (default 128)\n"
    "  --device-memory GIB     memory a rank may use (default: this GPU's, or this node's per rank)\n"
    "  --plan-steps K          steps measured after --plan-warmup W (defaults 10 and 3)\n"
    "  --json FILE             the plan as JSON (and the measurement: 'mnddp train --plan FILE')\n"
    "  --plot FILE.png         the predicted scaling curve (needs Python with matplotlib)\n"
    "  --from FILE             plan again from a plan file's measurement (another network, node size,\n"
    "                          memory), without measuring: no train options then\n";

PlanOptions take_plan_options(std::vector<std::string>& args) {
  namespace po = boost::program_options;
  PlanOptions o;
  po::options_description own;
  own.add_options()("network", po::value(&o.network))("gpus-per-node", po::value(&o.gpus_per_node))(
      "max-nodes", po::value(&o.max_nodes))("device-memory", po::value(&o.device_memory_gib))(
      "plan-steps", po::value(&o.steps))("plan-warmup", po::value(&o.warmup))("json", po::value(&o.json))(
      "plot", po::value(&o.plot))("from", po::value(&o.from));
  take_command_options(args, own, "mnddp plan");
  if (o.max_nodes < 1 || o.max_nodes > 1 << 16)
    throw UsageError(fmt::format("mnddp plan: --max-nodes {} is outside [1, 65536]", o.max_nodes));
  if (o.gpus_per_node < 0 || o.gpus_per_node > 1024)
    throw UsageError(fmt::format("mnddp plan: --gpus-per-node {} is outside [1, 1024]", o.gpus_per_node));
  if (o.device_memory_gib < 0)
    throw UsageError(fmt::format("mnddp plan: --device-memory {:g} is negative", o.device_memory_gib));
  if (o.steps < 1 || o.steps > 10000)
    throw UsageError(fmt::format("mnddp plan: --plan-steps {} is outside [1, 10000]", o.steps));
  if (o.warmup < 0 || o.warmup > 10000)
    throw UsageError(fmt::format("mnddp plan: --plan-warmup {} is outside [0, 10000]", o.warmup));
  if (!o.plot.empty() && o.plot.size() < 5)
    throw UsageError(fmt::format("mnddp plan: --plot '{}' is not a .png file", o.plot));
  if (!o.plot.empty() && o.plot.substr(o.plot.size() - 4) != ".png")
    throw UsageError(fmt::format("mnddp plan: --plot '{}' is not a .png file", o.plot));
  return o;
}

double node_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  meminfo >> key >> kib;  // "MemTotal: N kB" comes first
  return key == "MemTotal:" ? kib * 1024 : 0;
}

// Hears the loop: each measured step's phases, and the last backward pass's gradient-ready times
// relative to its start (the reducer writes them into `ready_times`).
class StepProbe final : public RunObserver {
 public:
  StepProbe(std::int64_t warmup, std::size_t parameters)
      : warmup_(warmup),
        ready_sum_(parameters, 0.0),
        process_start_(cpu_seconds(CLOCK_PROCESS_CPUTIME_ID)),
        loop_start_(cpu_seconds(CLOCK_THREAD_CPUTIME_ID)) {}
  std::vector<Clock::time_point> ready_times;

  void phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) override {
    current_[static_cast<std::size_t>(phase)] += seconds(begin, end);
    if (phase == StepPhase::Backward) {
      backward_begin_ = begin;
      backward_s_ = seconds(begin, end);
    }
  }
  void step_finished(std::int64_t step, std::int64_t, Clock::time_point, Clock::time_point) override {
    // CPU time of the whole process and of this (the loop's) thread: their difference over the
    // measured steps is the other threads' work (the loader), which one rank did on a spare core.
    const double process = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), loop = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    if (step == warmup_) {
      process_start_ = process;
      loop_start_ = loop;
    }
    if (step > warmup_) helper_cpu_s_ = (process - process_start_) - (loop - loop_start_);
    if (step > warmup_) {
      for (std::size_t i = 0; i < kStepPhaseCount; ++i) sums_[i] += current_[i];
      // A parameter the pass never reached (no gradient) is ready when backward ends.
      for (std::size_t i = 0; i < ready_sum_.size(); ++i) {
        const double t = seconds(backward_begin_, ready_times[i]);
        ready_sum_[i] += t >= 0 && t <= backward_s_ ? t : backward_s_;
      }
      ++measured_;
    }
    current_.fill(0.0);
  }

  std::int64_t measured() const { return measured_; }
  double helper_cpu_per_step() const { return std::max(0.0, helper_cpu_s_) / std::max<std::int64_t>(1, measured_); }
  double mean(StepPhase phase) const {
    return sums_[static_cast<std::size_t>(phase)] / std::max<std::int64_t>(1, measured_);
  }
  std::vector<double> mean_ready() const {
    std::vector<double> out(ready_sum_);
    for (double& v : out) v /= static_cast<double>(std::max<std::int64_t>(1, measured_));
    return out;
  }

 private:
  std::int64_t warmup_;
  PhaseSeconds current_{};
  PhaseSeconds sums_{};
  std::vector<double> ready_sum_;
  Clock::time_point backward_begin_;
  double backward_s_ = 0;
  double process_start_, loop_start_, helper_cpu_s_ = 0;

  static double cpu_seconds(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  std::int64_t measured_ = 0;
};

// The plot: share/mnddp/plan_plot.py beside an installed mnddp, scripts/ in a build tree; run by the
// Python this build's torch came from, else python3.
void write_plot(const std::string& json, const std::string& png) {
  std::error_code ec;
  const auto exe_dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  std::string script;
  for (const auto& candidate : {exe_dir / "../share/mnddp/plan_plot.py", exe_dir / "../scripts/plan_plot.py"})
    if (std::filesystem::is_regular_file(candidate, ec)) {
      script = std::filesystem::weakly_canonical(candidate, ec).string();
      break;
    }
  std::string interpreter = build::kPython;
  if (interpreter.empty() || !std::filesystem::exists(interpreter, ec)) interpreter = "python3";
  if (script.empty()) {
    spdlog::warn("--plot: plan_plot.py is not beside this mnddp (share/mnddp/); the plan is in '{}'", json);
    return;
  }
  const ProgramResult result = run_program({interpreter, script, json, png}, 120);
  if (!result.started || result.exit_code != 0)
    spdlog::warn("--plot '{}': not written ({} exited {}); run '{} {} {} {}' to see why", png, interpreter,
                 result.exit_code, interpreter, script, json, png);
  else
    std::printf("plan: wrote %s\n", png.c_str());
}

// Trains warmup + steps steps of `config` on this rank and returns what the plan needs of them.
PlanInputs measure(TrainingConfig config, const PlanOptions& options, const RankInfo& rank, MpiComm& world,
                   Watchdog& watchdog) {
  // The measurement: the run as configured, minus everything around its steps.
  config.max_steps = options.warmup + options.steps;
  config.epochs = std::numeric_limits<int>::max();
  config.steps_per_run = 0;
  config.val_data.clear();
  config.eval_interval = 0;
  config.checkpoint_dir.clear();
  config.local_checkpoint_dir.clear();
  config.checkpoint_minutes = 0;
  config.resume = parse_resume_from("none");
  config.deadline = DeadlineRequest{DeadlineRequest::Mode::None, 0.0};
  config.metrics_file.clear();
  config.trace_dir.clear();
  config.tensorboard_dir.clear();
  config.plan_file.clear();
  config.progress = ProgressMode::Lines;  // and at --log-level warn, no lines
  config.log_level = LogLevel::Warn;
  const int zero_stage = static_cast<int>(config.zero);
  config.zero = 0;  // measured whole; the plan splits it for --zero 1|2
  watchdog.set_timeout(config.collective_timeout);
  const int threads = configure_threads(config.threads, config.deterministic, rank);
  const double baseline = resident_bytes();

  Trainer trainer(config, rank, world);
  StepProbe probe(options.warmup, trainer.reducer().parameters().size());
  trainer.add_observer(probe);
  trainer.reducer().log_ready_times(&probe.ready_times);
  const TrainResult result = trainer.run();
  trainer.reducer().log_ready_times(nullptr);
  if (probe.measured() < 1)
    throw UsageError(fmt::format("mnddp plan: the data gave {} steps, fewer than --plan-warmup {} + 1", result.steps,
                                 options.warmup));
  const double peak_rss = peak_resident_bytes();  // before the snapshot below adds its copy
  const Trainer::StateSizes state = trainer.measure_state();

  PlanInputs in;
  in.model = fmt::format("{}, batch {} a rank, {}", config.model.text(), config.batch_size * config.grad_accum_steps,
                         choice_name(config.optimizer));
  in.device = trainer.device_description();
  in.batch_per_rank = config.batch_size * config.grad_accum_steps;
  in.mtbf_hours = config.mtbf_hours;
  in.checkpoint_cost_s = state.snapshot_s;
  in.step.data_wait_s = probe.mean(StepPhase::DataWait);
  in.step.forward_s = probe.mean(StepPhase::Forward);
  in.step.backward_s = probe.mean(StepPhase::Backward);
  in.step.optimizer_s = probe.mean(StepPhase::Optimizer) + probe.mean(StepPhase::ExposedComm);
  in.step.gradient_bytes = trainer.reducer().gradient_bytes();
  in.step.keys = trainer.reducer().bucket_keys();
  in.step.ready_s = probe.mean_ready();
  in.step.threads = threads;
  in.step.helper_cpu_s = probe.helper_cpu_per_step();
  in.options.buckets = BucketLimits{static_cast<std::size_t>(config.first_bucket_mb * (1 << 20)),
                                    static_cast<std::size_t>(config.bucket_cap_mb * (1 << 20))};
  in.options.zero_stage = zero_stage;
  in.options.gradient_bytes_factor = config.grad_compression == GradCompression::None ? 1.0 : 0.5;
  in.memory.parameters = state.parameters;
  in.memory.gradients = state.gradients;
  in.memory.optimizer_state = state.optimizer_state;
  in.memory.bucket_cap = static_cast<double>(in.options.buckets.cap_bytes);
  const bool gpu = result.peak_gpu_mib > 0;
  in.memory.peak = gpu ? result.peak_gpu_mib * (1 << 20) : peak_rss;
  in.memory.baseline = gpu ? 0 : baseline;
  if (gpu)
    in.device_memory = static_cast<double>(
        c10::getDeviceAllocator(c10::kCUDA)->getMemoryInfo(static_cast<c10::DeviceIndex>(rank_device())).second);
  return in;
}

}  // namespace

const char* plan_usage() { return kPlanUsage; }

int plan_command(Runtime& runtime, Watchdog& watchdog, std::vector<std::string> args) {
  MpiComm world;
  const RankInfo& rank = runtime.info();
  init_logging({rank.rank, rank.world_size, LogLevel::Warn, false});
  if (std::ranges::any_of(args, [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    if (rank.is_root()) std::printf("%s", kPlanUsage);
    return kExitOk;
  }
  PlanOptions options;
  PlanInputs in;
  TrainingConfig config;
  on_all_then_agree(world, [&] {
    if (rank.world_size != 1)
      throw UsageError(
          fmt::format("mnddp plan measures one rank and predicts the others: run it without mpirun "
                      "(or with one task), not on {} ranks",
                      rank.world_size));
    options = take_plan_options(args);
    if (!options.from.empty()) {
      if (!args.empty())
        throw UsageError(fmt::format("mnddp plan: --from '{}' plans from its measurement: '{}' is not a plan option",
                                     options.from, args.front()));
      in = load_plan_inputs(options.from, "--from");
    } else {
      config = parse_command_line(args, environment_from_process()).config;
    }
    if (!options.network.empty() || options.from.empty())
      in.network = load_network_profile(options.network.empty() ? "h200-nvlink-ib400" : options.network);
  });
  const auto begin = Clock::now();
  if (options.from.empty()) {
    const NetworkProfile network = in.network;
    in = measure(config, options, rank, world, watchdog);
    in.network = network;
  }
  in.gpus_per_node = options.gpus_per_node > 0 ? options.gpus_per_node : in.network.gpus_per_node;
  in.max_nodes = options.max_nodes;
  if (options.device_memory_gib > 0)
    in.device_memory = options.device_memory_gib * kGiB;
  else if (in.device_memory <= 0 || in.device.starts_with("cpu"))  // a CPU: the node's memory over its ranks
    in.device_memory = node_memory_bytes() / in.gpus_per_node;

  const ScalingPlan plan = make_scaling_plan(in);
  std::string text = scaling_plan_text(plan);
  if (options.from.empty())
    text += fmt::format("plan: measured {} steps in {:.1f} s on {}\n", options.steps,
                        std::chrono::duration<double>(Clock::now() - begin).count(), in.device);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!options.json.empty()) {
    std::ofstream out(options.json);
    out << scaling_plan_json(plan);
    if (!out.flush()) throw UsageError(fmt::format("mnddp plan: --json '{}' cannot be written", options.json));
    std::printf("plan: wrote %s\n", options.json.c_str());
  }
  if (!options.plot.empty()) {
    std::string json = options.json;
    if (json.empty()) {
      json = options.plot.substr(0, options.plot.size() - 4) + ".json";
      std::ofstream(json) << scaling_plan_json(plan);
    }
    write_plot(json, options.plot);
  }
  return kExitOk;
}

}  // namespace mnddp
