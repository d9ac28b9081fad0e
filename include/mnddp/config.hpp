// TrainingConfig: every setting of a training run, typed, each with its default in-line below.
// Choices are enums (choices.hpp), parsed once here: no module ever compares option text.
// Values come from the command line, MNDDP_* environment variables and an INI --config file, in
// that order of precedence. The option table (config_options.cpp) is the one place that names,
// documents and validates each field; --help, --print-config and docs/CONFIG.md all come from it.
#pragma once

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/choices.hpp"
#include "mnddp/ckpt/resume_from.hpp"
#include "mnddp/env_info.hpp"
#include "mnddp/fault/fault_plan.hpp"
#include "mnddp/job_deadline.hpp"

namespace mnddp {

struct TrainingConfig {
  // --- data ---
  std::string train_data;  // required: glob, directory, list file or comma list
  std::string val_data;    // empty: no validation
  std::string x_name = "x";
  std::string y_name = "y";
  std::int64_t batch_size = 64;  // per rank
  bool shuffle = true;
  bool drop_last = true;
  int prefetch_batches = 4;
  int loader_threads = 0;  // threads per rank inflating compressed chunks; 0: the rank's cores left after --threads
  int num_classes = 10;
  PartitionMode partition = PartitionMode::Sample;
  std::int64_t shuffle_buffer = 4096;                         // shard mode: samples shuffled together on each rank
  ShuffleUnit shuffle_unit = ShuffleUnit::Sample;             // chunk: chunks dealt to ranks, shuffled in windows
  std::int64_t shuffle_window = 8;                            // --shuffle-unit chunk: chunks shuffled together
  NonfinitePolicy nonfinite_inputs = NonfinitePolicy::Error;  // NaN/Inf in float inputs
  bool scale_uint8 = true;                                    // uint8 inputs are divided by 255
  std::string feature_stats;  // mnddp-data stats file: per-feature normalisation; empty: off

  // --- task ---
  TaskKind task = TaskKind::Classification;
  double label_smoothing = 0.0;               // classification
  RegressionLoss loss = RegressionLoss::Mse;  // regression
  double huber_delta = 1.0;                   // regression with --loss huber
  std::int64_t vocab_size = 0;                // lm; 0: largest token id in the training data + 1
  std::int64_t context = 0;                   // lm: tokens per input; 0: the stored length - 1

  // --- model ---
  ModelName model;   // a zoo network, or torchscript:PATH
  int hidden = 256;  // MLP width, ConvNet/CNN3D base channels, ViT/GPT width (d_model)
  int layers = 2;
  int heads = 4;                                    // ViT/GPT attention heads
  int patch_size = 4;                               // ViT: square patches of this side
  Stem stem = Stem::Auto;                           // ResNet first layers
  MemoryLayout memory_format = MemoryLayout::Auto;  // auto: channels-last for 2-D conv models on CPU
  bool tie_embeddings = true;                       // GPT: the output layer shares the token embedding
  double dropout = 0.0;

  // --- optimizer ---
  OptimizerKind optimizer = OptimizerKind::Sgd;
  double lr = 0.05;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;        // AdamW and LAMB: added to sqrt(v_hat); LARS: in the trust ratio's denominator
  double lars_eta = 0.001;  // LARS trust coefficient
  // Biases and norms (parameters of at most one dimension) without weight decay or trust ratio;
  // nullopt (auto): on for AdamW, LARS and LAMB, off for SGD (effective_no_decay_norm_bias).
  std::optional<bool> no_decay_norm_bias;
  double grad_clip = 0.0;  // max global grad norm; 0: off

  // --- schedule ---
  LrSchedule lr_schedule = LrSchedule::Constant;
  std::int64_t warmup_steps = 0;
  std::int64_t lr_step_size = 1000;
  double lr_gamma = 0.1;
  double min_lr = 0.0;

  // --- training ---
  int epochs = 1;
  std::int64_t max_steps = 0;      // optimizer steps; 0: no limit
  std::int64_t steps_per_run = 0;  // stop (checkpointed) after this many steps of this invocation; 0: no limit
  std::int64_t eval_interval = 0;  // also validate every this many steps; 0: at the end of each epoch only
  int grad_accum_steps = 1;
  Amp amp = Amp::Off;
  NonfiniteGradients on_nonfinite = NonfiniteGradients::Abort;  // without the fp16 scaler
  std::int64_t seed = 42;
  bool deterministic = false;  // bitwise-reproducible: torch's deterministic algorithms, MKL strict CNR
  int threads = 0;  // torch intra-op threads per rank; 0: derive from SLURM_CPUS_PER_TASK / OMP_NUM_THREADS / cores

  // --- checkpoint ---
  std::string checkpoint_dir;            // empty: no checkpoints
  std::int64_t checkpoint_interval = 0;  // steps; 0: only at the end
  int keep_last = 3;
  std::string keep_best;         // a validation metric: its best checkpoint is kept as best.h5; empty: off
  bool checkpoint_async = true;  // write checkpoints beside training (after a host copy of the state)
  ResumeFrom resume;             // auto | none | PATH
  // On resume, train on with this run's global batch when it differs from the checkpoint's (and so
  // a new sample order); otherwise the checkpoint's is kept, or the run refuses.
  bool allow_batch_change = false;
  double checkpoint_minutes = 0.0;                        // also checkpoint every this many minutes; 0: off
  std::vector<int> preempt_signals = {SIGUSR2, SIGTERM};  // checkpoint and exit with code 3 on these
  DeadlineRequest deadline;       // auto: the Slurm job's end; none; or a duration from the start
  double deadline_margin = 30.0;  // seconds the last checkpoint must end before the deadline
  // The node-local level (docs/CHECKPOINT_FORMAT.md): the same path on every node; empty: off.
  std::string local_checkpoint_dir;
  std::int64_t local_checkpoint_interval = 0;  // steps between node-local checkpoints
  double mtbf_hours = 24.0;  // the job's mean time between failures, for the summary's interval advice

  // --- logging ---
  std::int64_t log_interval = 10;                // steps
  std::string metrics_file = "metrics.jsonl";    // rank 0 writes JSON lines; empty: off
  std::string incident_file = "incident.jsonl";  // on a failure every rank appends its record; empty: off
  LogLevel log_level = LogLevel::Info;
  bool log_all_ranks = false;
  ProgressMode progress = ProgressMode::Auto;  // auto: a bar when rank 0's stdout is a terminal
  std::string trace_dir;                       // one Chrome-trace JSON per rank; empty: off
  std::string tensorboard_dir;                 // rank 0's TensorBoard scalars; empty: off
  std::string plan_file;                       // mnddp plan --json's file: the summary's prediction; empty: off

  // --- distributed ---
  Backend backend = Backend::Auto;
  DeviceRequest device = DeviceRequest::Auto;
  double collective_timeout = 600.0;  // seconds
  bool debug_collectives = false;
  std::int64_t check_replicas_every = 10;  // log intervals between parameter checks; 0: off
  FaultPlan inject_fault;                  // testing aid: KIND@STEP[:RANK] (fault/fault_plan.hpp); empty: none
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool find_unused_parameters = false;
  GradCompression grad_compression = GradCompression::None;
  bool broadcast_buffers = true;
  bool sync_batch_norm = false;  // BatchNorm statistics over the global batch (SyncBatchNorm2d)
  std::int64_t zero = 0;         // ZeRO stage: 1 shards the optimizer state, 2 the gradients too

  bool operator==(const TrainingConfig&) const = default;
};

// What the command line asked for besides training settings.
struct ParsedCommandLine {
  TrainingConfig config;
  bool help = false;
  bool help_markdown = false;  // the option reference as Markdown (docs/CONFIG.md)
  bool print_config = false;
  std::string config_file;  // as given to --config
};

// Parses argv (without the program and subcommand names), the environment and the --config file.
// Throws UsageError with a one-line message naming the option (and file) and the bad value.
// `base_ini` (to_ini text, e.g. a checkpoint's config for `mnddp eval`) is the lowest-precedence
// source, under the defaults of every option it names.
ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env,
                                     const std::string& base_ini = {});

// Parses an INI text as produced by to_ini (used to hand rank 0's config to every rank).
TrainingConfig parse_ini_text(const std::string& text);

// Checks every field's range, and the rules between options (--min-lr against --lr, ...). Throws
// UsageError naming the option and the value.
void validate(const TrainingConfig& config);

// An INI text holding every option with its current value; parse_ini_text(to_ini(c)) == c.
std::string to_ini(const TrainingConfig& config);

std::string help_text();      // grouped, for --help
std::string help_markdown();  // the configuration reference table

// The environment variable that sets `option` (e.g. batch-size -> MNDDP_BATCH_SIZE).
std::string env_name_for(const std::string& option);

}  // namespace mnddp
