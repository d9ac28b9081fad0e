// The option table: name, group, type, help text and range check of every TrainingConfig field.
// Defaults live in the struct's member initialisers; everything else about an option lives here.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "config_table.hpp"
#include "config_table_builder.hpp"
#include "mnddp/error.hpp"
#include "mnddp/preemption.hpp"

namespace mnddp::config_detail {
namespace {

using namespace table_builder;

std::vector<OptionSpec> build_table() {
  std::vector<OptionSpec> rows;
  TableBuilder t(rows);
  using C = TrainingConfig;

  t.group("Data");
  t.add("train-data", &C::train_data,
        "training shards (required): a glob, a directory, a list file (.txt) or a comma list", not_empty());
  t.add("val-data", &C::val_data, "validation shards, same forms; empty for no validation", any_text());
  t.add("x-name", &C::x_name, "name of the input dataset inside each HDF5 file", not_empty());
  t.add("y-name", &C::y_name, "name of the label dataset inside each HDF5 file", not_empty());
  t.add("batch-size", &C::batch_size, "samples per rank per micro-step", at_least<std::int64_t>(1));
  t.add("shuffle", &C::shuffle, "shuffle the training order each epoch (seeded by seed and epoch)", Check<bool>{});
  t.add("drop-last", &C::drop_last, "drop the tail that does not fill a global batch; false pads it by wrapping around",
        Check<bool>{});
  t.add("prefetch-batches", &C::prefetch_batches, "batches the loader thread reads ahead", at_least(1));
  t.add("loader-threads", &C::loader_threads,
        "threads per rank that inflate gzip-compressed chunks, a batch's at once; 0: the rank's cores "
        "(SLURM_CPUS_PER_TASK, else cores / ranks on the node) left after --threads, at least 1",
        at_least(0));
  t.add("num-classes", &C::num_classes, "number of label classes (labels must be in [0, num-classes))", at_least(2));

  t.choice("partition", &C::partition,
           "sample: one global shuffle, any rank reads any file; shard: whole files per rank (locality at scale)");
  t.add("shuffle-buffer", &C::shuffle_buffer, "shard partition: samples shuffled together on each rank",
        at_least<std::int64_t>(1));
  t.choice("shuffle-unit", &C::shuffle_unit,
           "sample: every epoch a full shuffle of the samples; chunk (for compressed shards): the HDF5 chunks are "
           "shuffled and dealt to ranks, and each rank shuffles the samples of --shuffle-window chunks at a time, "
           "so each chunk is inflated once per epoch (docs/DATA.md)");
  t.add("shuffle-window", &C::shuffle_window, "--shuffle-unit chunk: chunks whose samples each rank shuffles together",
        at_least<std::int64_t>(1));
  t.choice("nonfinite-inputs", &C::nonfinite_inputs, "NaN or Inf in float inputs: stop with an error, warn, or ignore");
  t.add("scale-uint8", &C::scale_uint8, "divide uint8 inputs by 255", Check<bool>{});
  t.add("feature-stats", &C::feature_stats,
        "normalise each feature with the mean and std in this file (mnddp-data stats); empty: off", any_text());

  t.group("Task");
  t.choice("task", &C::task,
           "classification (integer labels y [N]), regression (numeric targets y [N] or [N, k]) or lm (next-token "
           "prediction on integer token ids x [N, T]; no y)");
  t.add("label-smoothing", &C::label_smoothing, "classification: label smoothing of the cross-entropy, as torch's",
        in_half_open(0.0, 1.0));
  t.choice("loss", &C::loss, "regression loss: mean squared error, or Huber with huber-delta");
  t.add("huber-delta", &C::huber_delta, "regression: where the Huber loss turns from quadratic to linear",
        greater_than(0.0));
  t.add("vocab-size", &C::vocab_size,
        "lm: token ids must be in [0, vocab-size); 0: the largest id in the training data + 1 (reads all of it)",
        at_least<std::int64_t>(0));
  t.add("context", &C::context, "lm: tokens per input sequence (a prefix of each stored one); 0: the stored length - 1",
        at_least<std::int64_t>(0));

  t.group("Model");
  {
    std::string zoo;
    for (const auto& name : choice_names<ModelKind>())
      if (name != choice_name(ModelKind::Torchscript)) zoo += name + " | ";
    t.parsed<ModelName>(
        "model", &C::model,
        "network to train (resnet*, vit: torchvision's layouts; gpt: for --task lm; torchscript:PATH: "
        "your own module, scripted or traced in Python, see docs/MODELS.md)",
        zoo + "torchscript:PATH", parse_model_name, [](const ModelName& m) { return m.text(); },
        " (" + zoo + "torchscript:PATH)");
  }
  t.add("hidden", &C::hidden,
        "width of the hidden layers (MLP), base channels (ConvNet, CNN3D) or model width d_model (ViT, GPT)",
        at_least(1));
  t.add("layers", &C::layers,
        "number of hidden layers (MLP), conv blocks (ConvNet, CNN3D) or Transformer blocks (ViT, GPT)", at_least(1));
  t.choice("stem", &C::stem,
           "ResNet first layers: imagenet (7x7 stride-2 convolution, max-pool), cifar (3x3, no pooling), or auto "
           "(cifar for images up to 64x64)");
  t.choice("memory-format", &C::memory_format,
           "layout of 4-D weights and activations: channels-last (NHWC, which oneDNN and cuDNN's tensor cores "
           "convolve without reordering the activations), contiguous (NCHW), or auto (channels-last for convnet and "
           "resnet* on CPU, or on a GPU with --amp bf16|fp16, without --deterministic; else contiguous)");
  t.add("heads", &C::heads, "ViT, GPT: attention heads (hidden must be a multiple)", at_least(1));
  t.add("patch-size", &C::patch_size, "ViT: side of the square patches (must divide the image's height and width)",
        at_least(1));
  t.add("tie-embeddings", &C::tie_embeddings, "GPT: the output layer shares the token embedding's weight",
        Check<bool>{});
  t.add("dropout", &C::dropout, "dropout probability (before the classifier; GPT: in every block)",
        in_half_open(0.0, 1.0));

  t.group("Optimizer");
  t.choice("optimizer", &C::optimizer, "optimizer");
  t.add("lr", &C::lr, "peak learning rate", greater_than(0.0));
  t.add("momentum", &C::momentum, "SGD and LARS momentum", in_half_open(0.0, 1.0));
  t.add("nesterov", &C::nesterov, "use Nesterov momentum (SGD only)", Check<bool>{});
  t.add("weight-decay", &C::weight_decay,
        "weight decay (SGD: added to the gradient; AdamW and LAMB: decoupled; LARS: added to the gradient and in "
        "the trust ratio)",
        at_least(0.0));
  t.add("beta1", &C::beta1, "AdamW and LAMB beta1", in_half_open(0.0, 1.0));
  t.add("beta2", &C::beta2, "AdamW and LAMB beta2", in_half_open(0.0, 1.0));
  t.add("eps", &C::eps, "AdamW and LAMB: added to sqrt(v_hat); LARS: in the trust ratio's denominator",
        greater_than(0.0));
  t.add("lars-eta", &C::lars_eta, "LARS trust coefficient eta (docs/MODELS.md#optimizers)", greater_than(0.0));
  t.parsed<std::optional<bool>>(
      "no-decay-norm-bias", &C::no_decay_norm_bias,
      "biases and normalization weights (every parameter of at most one dimension) get no weight decay and, with "
      "LARS and LAMB, no trust ratio; auto: true for adamw, lars and lamb, false for sgd",
      "auto | true | false", parse_auto_bool("no-decay-norm-bias"), format_auto_bool, " (auto | true | false)", "true");
  t.add("grad-clip", &C::grad_clip, "clip the global gradient norm to this value; 0 disables", at_least(0.0));

  t.group("Schedule");
  t.choice("lr-schedule", &C::lr_schedule, "learning-rate schedule after warm-up");
  t.add("warmup-steps", &C::warmup_steps, "linear warm-up from 0 over this many optimizer steps",
        at_least<std::int64_t>(0));
  t.add("lr-step-size", &C::lr_step_size, "step schedule: multiply by lr-gamma every this many steps",
        at_least<std::int64_t>(1));
  t.add("lr-gamma", &C::lr_gamma, "step schedule: decay factor", Check<double>([](const double& v) {
          return (std::isfinite(v) && v > 0.0 && v <= 1.0) ? std::string() : std::string("must be in (0, 1]");
        }));
  t.add("min-lr", &C::min_lr, "cosine and linear schedules: the learning rate at the last step", at_least(0.0));

  t.group("Training");
  t.add("epochs", &C::epochs, "passes over the training data", at_least(1));
  t.add("max-steps", &C::max_steps, "stop after this many optimizer steps; 0: no limit", at_least<std::int64_t>(0));
  t.add("steps-per-run", &C::steps_per_run,
        "stop after this many steps of this invocation, with a checkpoint, for job chains (the schedule still "
        "spans max-steps/epochs); 0: no limit",
        at_least<std::int64_t>(0));
  t.add("eval-interval", &C::eval_interval,
        "also validate every this many optimizer steps (with --val-data); validation always ends each epoch; 0: only "
        "then",
        at_least<std::int64_t>(0));
  t.add("grad-accum-steps", &C::grad_accum_steps, "micro-steps per optimizer step (gradient accumulation)",
        at_least(1));
  t.choice("amp", &C::amp, "automatic mixed precision (fp16 needs CUDA)");
  t.choice("on-nonfinite", &C::on_nonfinite,
           "a step whose gradients hold NaN/Inf (without the fp16 loss scaler, which always skips them): "
           "abort with a message naming the step and loss, or skip the step");
  t.add("seed", &C::seed, "seed for initialisation, sampling and dropout", at_least<std::int64_t>(0));
  t.add("deterministic", &C::deterministic,
        "bitwise-reproducible runs: torch's deterministic algorithms (an op without one stops the run, naming "
        "it), deterministic cuDNN, CUBLAS_WORKSPACE_CONFIG=:4096:8, and MKL_CBWR=AUTO,STRICT so CPU results do not "
        "depend on --threads",
        Check<bool>{});
  t.add("threads", &C::threads,
        "torch threads per rank; 0: SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else cores / ranks on the node",
        at_least(0));

  t.group("Checkpoint");
  t.add("checkpoint-dir", &C::checkpoint_dir, "directory for checkpoints; empty: no checkpoints", any_text());
  t.add("checkpoint-interval", &C::checkpoint_interval, "checkpoint every this many steps; 0: only at the end",
        at_least<std::int64_t>(0));
  t.add("keep-last", &C::keep_last, "checkpoints to keep", at_least(1));
  t.add("keep-best", &C::keep_best,
        "also keep the checkpoint with the best value of this validation metric (loss, accuracy, r2, perplexity, "
        "...; lower is better for loss, mse, mae and perplexity) as best.h5, outside the keep-last rotation; "
        "empty: off",
        any_text());
  t.add("checkpoint-async", &C::checkpoint_async,
        "write checkpoints beside training: the step waits only for a host copy of the state (which needs "
        "that much memory); false: training waits for the whole commit",
        Check<bool>{});
  t.parsed<ResumeFrom>("resume", &C::resume,
                       "auto (newest valid checkpoint in checkpoint-dir), none, or a checkpoint path",
                       "auto | none | PATH", parse_resume_from, [](const ResumeFrom& r) { return r.text(); });
  t.add("allow-batch-change", &C::allow_batch_change,
        "on resume, train on with this run's global batch (ranks x batch-size x grad-accum-steps) when it differs "
        "from the checkpoint's, in a new sample order; false keeps the checkpoint's by changing batch-size or "
        "grad-accum-steps, or refuses where the world size cannot divide it",
        Check<bool>{});

  t.add("checkpoint-minutes", &C::checkpoint_minutes, "also checkpoint every this many minutes; 0 disables",
        at_least(0.0));
  t.parsed<std::vector<int>>("preempt-signals", &C::preempt_signals,
                             "signals that make every rank checkpoint at the next step and exit with code 3 "
                             "(comma list of names or numbers)",
                             "signals", parse_signal_list, format_signal_list);

  t.parsed<DeadlineRequest>("deadline", &C::deadline,
                            "when the job will be ended, so that the last checkpoint is taken in time even "
                            "without a warning signal: auto (the Slurm job's end: squeue, scontrol or "
                            "SLURM_JOB_END_TIME; none outside Slurm), none, or a duration from the start "
                            "(3600, 45m, 2h, HH:MM:SS). Near it, every rank checkpoints and exits with code 3",
                            "string", parse_deadline, format_deadline);
  t.add("deadline-margin", &C::deadline_margin,
        "seconds the last checkpoint must end before the deadline; the measured length of the longest checkpoint "
        "and step so far is added",
        at_least(0.0));

  t.add("local-checkpoint-dir", &C::local_checkpoint_dir,
        "node-local directory (the same path on every node: /dev/shm/..., a local disk) for frequent checkpoints "
        "that survive a lost process or node: each node keeps the last complete one (with --zero, each rank's "
        "shares also on the next node), and a restarted run restores from it in seconds; needs checkpoint-dir, "
        "which then gets every checkpoint-interval-th step from the same snapshot; empty: off",
        any_text());
  t.add("local-checkpoint-interval", &C::local_checkpoint_interval,
        "node-local checkpoint every this many steps (needs local-checkpoint-dir); 0: none", at_least<std::int64_t>(0));
  t.add("mtbf", &C::mtbf_hours,
        "the job's mean time between failures in hours, for the end-of-run advice on checkpoint intervals "
        "(Young and Daly: sqrt(2 x checkpoint cost x MTBF))",
        greater_than(0.0));

  t.group("Logging");
  t.add("log-interval", &C::log_interval, "log and record metrics every this many steps", at_least<std::int64_t>(1));
  t.add("metrics-file", &C::metrics_file, "JSON-lines metrics written by rank 0; empty: off", any_text());
  t.add("incident-file", &C::incident_file,
        "when the job fails (error, crash, hang, desync), every rank that can still act appends its record here "
        "(recent collectives, step, threads' activities and stacks); 'mnddp incident FILE' explains it; empty: off",
        any_text());
  t.choice("log-level", &C::log_level,
           "log level of rank 0 (other ranks log warnings and errors); warn and error also leave out the end-of-run "
           "summary table (the metrics file keeps it)");
  t.add("log-all-ranks", &C::log_all_ranks, "every rank logs at log-level, not only rank 0", Check<bool>{});
  t.choice("progress", &C::progress,
           "bar: rank 0 redraws one progress line (step, epoch, ETA, samples/s, loss, data wait) in place of the "
           "interval log lines; lines: a log line every log-interval; auto: bar when rank 0's stdout is a terminal");
  t.add("trace", &C::trace_dir,
        "write a Chrome-trace/Perfetto timeline per rank into this directory (rank-NNNNN.trace.json: data wait, "
        "forward, backward, optimizer, each all-reduce, checkpoints, validation); 'mnddp trace merge DIR' joins "
        "them; empty: off",
        any_text());
  t.add("plan", &C::plan_file,
        "a plan file from 'mnddp plan --json FILE': the end-of-run summary prints its prediction for this run's "
        "ranks and nodes beside the measured step time; empty: off",
        any_text());
  t.add("tensorboard", &C::tensorboard_dir,
        "rank 0 writes TensorBoard scalars into this directory (loss, lr, samples/s, data-wait and "
        "exposed-communication fractions, loss scale, validation metrics): tensorboard --logdir DIR; empty: off",
        any_text());

  t.group("Distributed");
  t.choice("backend", &C::backend, "gradient all-reduce backend: auto picks nccl when every rank has a GPU");
  t.choice("device", &C::device,
           "compute device: auto picks cuda when a GPU is visible. LibTorch's CUDA libraries (~230 MB of memory per "
           "rank) are loaded only for cuda, and for auto where a CUDA driver (libcuda.so.1) exists");
  t.add("collective-timeout", &C::collective_timeout,
        "seconds a collective may stay unfinished before the watchdog explains where every rank is and aborts "
        "the job (exit code 4); must exceed the longest rank-0-only work, such as scanning many shards",
        greater_than(0.0));
  t.add("debug-collectives", &C::debug_collectives,
        "before every MPI collective, check that all ranks make the same call (op, dtype, count, label): a mismatch "
        "stops the job (exit code 4) naming the call and the ranks; costs one small all-gather per collective",
        Check<bool>{});
  t.add("check-replicas-every", &C::check_replicas_every,
        "compare a fingerprint of the parameters across ranks every this many log intervals and at the last "
        "step (riding on the metrics all-reduce: no extra collective); differing replicas stop the job with exit "
        "code 4. The ranks' collective call sequences are compared every interval regardless. 0: no parameter "
        "check",
        at_least<std::int64_t>(0));
  t.parsed<FaultPlan>("inject-fault", &C::inject_fault,
                      "testing aid: fail on purpose, KIND@STEP[:RANK]; the kinds are in docs/FAULT_TOLERANCE.md",
                      "string", parse_fault_plan, [](const FaultPlan& plan) { return plan.spec(); });
  t.add("bucket-cap-mb", &C::bucket_cap_mb, "gradient bucket size in MiB: one all-reduce per bucket",
        greater_than(0.0));
  t.add("first-bucket-mb", &C::first_bucket_mb,
        "size of the first bucket in MiB (small, so communication starts early)", greater_than(0.0));
  t.add("find-unused-parameters", &C::find_unused_parameters,
        "find parameters the forward pass did not use and reduce their buckets without waiting for them",
        Check<bool>{});
  t.choice("grad-compression", &C::grad_compression, "all-reduce gradients in this precision");
  t.add("broadcast-buffers", &C::broadcast_buffers,
        "copy rank 0's buffers (BatchNorm statistics) to all ranks every step", Check<bool>{});
  t.add("sync-batchnorm", &C::sync_batch_norm,
        "BatchNorm statistics over the global batch, like torch.nn.SyncBatchNorm (convnet, resnet*): two small "
        "all-reduces per BatchNorm layer forward, one backward; without it each rank normalises by its own batch",
        Check<bool>{});
  t.add("zero", &C::zero,
        "ZeRO stage (docs/ZERO.md): 0 every rank holds the whole optimizer state; 1 each rank keeps and updates "
        "only its 1/N share of it, and the updated parameters are all-gathered; 2 the gradients are "
        "reduce-scattered too, so each rank keeps only its share of them",
        Check<std::int64_t>(
            [](const std::int64_t& v) { return v >= 0 && v <= 2 ? std::string() : std::string("must be 0, 1 or 2"); }));
  return rows;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = build_table();
  return table;
}

const std::vector<std::string>& option_groups() {
  static const std::vector<std::string> groups = {"Data",     "Task",       "Model",   "Optimizer",  "Schedule",
                                                  "Training", "Checkpoint", "Logging", "Distributed"};
  return groups;
}

}  // namespace mnddp::config_detail
