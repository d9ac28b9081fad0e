// Resuming on another world size: the checkpoint found early, and the batch shape that keeps its
// global batch (or the refusal that names what would).
#include "mnddp/train/resume_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <sstream>
#include <vector>

#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/ckpt/local_restore.hpp"
#include "mnddp/ckpt/parallel_verify.hpp"
#include "mnddp/error.hpp"
#include "mnddp/program_options_message.hpp"
#include "mnddp/train/module_options.hpp"

namespace mnddp {
namespace {

// The world sizes up to `limit` that divide `global`, for the refusal's advice.
std::vector<std::int64_t> dividing_world_sizes(std::int64_t global, std::int64_t limit) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t m = 1; m <= global && m <= limit; ++m)
    if (global % m == 0) sizes.push_back(m);
  return sizes;
}

// "--batch-size 8 -> 4 and --grad-accum-steps 1 -> 2", or one of them.
std::string describe_change(const BatchShape& asked, std::int64_t batch, std::int64_t accum) {
  std::vector<std::string> parts;
  if (batch != asked.batch_size) parts.push_back(fmt::format("--batch-size {} -> {}", asked.batch_size, batch));
  if (accum != asked.grad_accum_steps)
    parts.push_back(fmt::format("--grad-accum-steps {} -> {}", asked.grad_accum_steps, accum));
  return fmt::format("{}", fmt::join(parts, " and "));
}

// Checkpoints written before the accumulation was an attribute keep it in their stored config: only
// that key is read (the rest may name options since renamed); a config without it predates the
// option, so there was no accumulation.
std::int64_t accumulation_of(const CheckpointOrigin& origin, const std::string& path) {
  namespace po = boost::program_options;
  if (origin.position.grad_accum_steps > 0) return origin.position.grad_accum_steps;
  int accum = 1;
  po::options_description wanted;
  wanted.add_options()("grad-accum-steps", po::value(&accum));
  try {
    std::istringstream text(origin.config_ini);
    po::variables_map values;
    po::store(po::parse_config_file(text, wanted, /*allow_unregistered=*/true), values);
    po::notify(values);
  } catch (const po::error& error) {
    throw UsageError(fmt::format("--resume '{}': its stored config does not tell its --grad-accum-steps ({})", path,
                                 program_options_message(error)));
  }
  if (accum < 1)
    throw UsageError(fmt::format("--resume '{}': its stored config has --grad-accum-steps {}", path, accum));
  return accum;
}

}  // namespace

std::string BatchShape::describe() const {
  return fmt::format("{} rank{} x --batch-size {} x --grad-accum-steps {}", world_size, world_size == 1 ? "" : "s",
                     batch_size, grad_accum_steps);
}

ResumeBatch plan_resume_batch(const BatchShape& written, const BatchShape& asked, bool allow_change,
                              const std::string& path) {
  ResumeBatch plan{asked.batch_size, asked.grad_accum_steps, false, ""};
  const std::int64_t global = written.global();
  if (asked.global() == global) return plan;
  if (allow_change) {
    plan.global_batch_changed = true;
    plan.message = fmt::format(
        "--allow-batch-change: the global batch changes from {} ({}) to {} ({}); the sample order from here on is "
        "not the original run's, and the learning rate is not rescaled",
        global, written.describe(), asked.global(), asked.describe());
    return plan;
  }
  if (global % asked.world_size != 0)
    throw UsageError(fmt::format(
        "--resume '{}': written with a global batch of {} samples ({}), which {} ranks cannot share equally; run on "
        "{} ranks to keep it, or pass --allow-batch-change to train on with {} samples per step ({}) in a new sample "
        "order",
        path, global, written.describe(), asked.world_size, fmt::join(dividing_world_sizes(global, 4096), ", "),
        asked.global(), asked.describe()));
  const std::int64_t per_rank = global / asked.world_size;
  std::int64_t batch = std::min(asked.batch_size, per_rank);
  while (per_rank % batch != 0) --batch;
  plan.batch_size = batch;
  plan.grad_accum_steps = per_rank / batch;
  plan.message = fmt::format(
      "resume on {} ranks: {} keeps the checkpoint's global batch of {} ({}) and its sample order "
      "(--allow-batch-change "
      "would train on with {} instead)",
      asked.world_size, describe_change(asked, plan.batch_size, plan.grad_accum_steps), global, written.describe(),
      asked.global());
  return plan;
}

std::int64_t micro_batches_done_in(const TrainingPosition& written, const BatchShape& now, std::int64_t* repeated) {
  const std::int64_t samples_done = written.global_batches_done * written.world_size * written.batch_size;
  const std::int64_t steps_done = samples_done / now.global();
  *repeated = samples_done - steps_done * now.global();
  return steps_done * now.grad_accum_steps;
}

namespace {

// --resume auto with a node-local level: its newest complete checkpoint, gathered on every node, when
// it is at least as new as --checkpoint-dir's newest and verifies; "" otherwise (with why, once).
std::string from_local_level(const TrainingConfig& config, MpiComm& control) {
  if (config.local_checkpoint_dir.empty() || config.resume.mode != ResumeFrom::Mode::Auto) return {};
  const LocalLevelOptions local = local_level_options(config);
  const LocalRestore restored = restore_local_level(control, local.directory, local.run);
  // The file system's newest by name (verified only if it is the one chosen).
  std::int64_t newest_on_file_system = -1;
  on_root_then_agree(control, [&] {
    const auto committed = CheckpointManager::committed_in(config.checkpoint_dir);
    if (!committed.empty()) {
      const std::string name = std::filesystem::path(committed.back()).filename().string();  // step-<N>.h5
      newest_on_file_system = std::stoll(name.substr(5, name.size() - 8));
    }
  });
  control.broadcast(&newest_on_file_system, 1, DType::I64, 0);
  const auto fall_back = [&](const std::string& why) {
    if (control.is_root()) {
      if (newest_on_file_system >= 0)
        spdlog::info("restore: from --checkpoint-dir '{}' ({})", config.checkpoint_dir, why);
      else
        spdlog::warn("restore: {}, and --checkpoint-dir '{}' holds no checkpoint", why, config.checkpoint_dir);
    }
    return std::string();
  };
  if (restored.path.empty()) return newest_on_file_system >= 0 ? fall_back(restored.summary) : std::string();
  if (restored.step < newest_on_file_system)
    return fall_back(
        fmt::format("its step {} is newer than the node-local level's {}", newest_on_file_system, restored.step));
  const CheckpointVerdict verdict = verify_checkpoint_in_parallel(control, restored.path);
  if (verdict.kind != CheckpointVerdict::Kind::Good)
    return fall_back(fmt::format("the node-local checkpoint does not verify: {}", verdict.message));
  if (control.is_root()) spdlog::info("restore: {}", restored.summary);
  return restored.path;
}

}  // namespace

std::optional<ResumePoint> find_resume_point(const TrainingConfig& config, MpiComm& control) {
  std::string path = from_local_level(config, control);
  if (path.empty()) path = CheckpointManager::resolve_resume(control, config.checkpoint_dir, config.resume);
  if (path.empty()) {
    if (config.resume.mode == ResumeFrom::Mode::Auto && !config.checkpoint_dir.empty())
      spdlog::info("no checkpoint in '{}': starting from scratch", config.checkpoint_dir);
    return std::nullopt;
  }
  CheckpointOrigin origin = read_checkpoint_origin(path, control);
  ResumePoint point{path, origin.position};
  std::int64_t accum = 1;
  on_root_then_agree(control, [&] { accum = accumulation_of(origin, path); });
  control.broadcast(&accum, 1, DType::I64, 0);
  point.written.grad_accum_steps = accum;
  return point;
}

const char* order_dealt_by_world_size(const TrainingConfig& config) {
  return config.partition == PartitionMode::Shard    ? "--partition shard assigns files"
         : config.shuffle_unit == ShuffleUnit::Chunk ? "--shuffle-unit chunk deals chunks"
                                                     : nullptr;
}

TrainingConfig with_resumed_batch(const TrainingConfig& config, const ResumePoint& point, const RankInfo& rank) {
  const TrainingPosition& written = point.written;
  const char* dealt = order_dealt_by_world_size(config);
  const bool other_world = written.world_size != rank.world_size;
  if (dealt != nullptr && other_world && !config.allow_batch_change)
    throw UsageError(fmt::format(
        "--resume '{}': written by {} ranks, resumed by {}; {} by world size, so its order cannot continue (use {} "
        "ranks, or {}, or --allow-batch-change to restart the epoch in a new order)",
        point.path, written.world_size, rank.world_size, dealt, written.world_size,
        config.partition == PartitionMode::Shard ? "--partition sample" : "--shuffle-unit sample"));
  const BatchShape before{written.world_size, written.batch_size, written.grad_accum_steps};
  BatchShape asked{rank.world_size, config.batch_size, config.grad_accum_steps};
  // --shuffle-unit chunk cuts unchunked datasets into chunks of the batch size: the order continues
  // only with the batch it was written with.
  if (config.shuffle_unit == ShuffleUnit::Chunk && !other_world && !config.allow_batch_change &&
      asked.batch_size != written.batch_size) {
    if (rank.is_root())
      spdlog::info("--shuffle-unit chunk: --batch-size {} -> {}, the checkpoint's, whose chunks its order is made of",
                   asked.batch_size, written.batch_size);
    asked.batch_size = written.batch_size;
  }
  const ResumeBatch plan = plan_resume_batch(before, asked, config.allow_batch_change, point.path);
  if (rank.is_root()) {
    if (plan.global_batch_changed)
      spdlog::warn("{}", plan.message);
    else if (!plan.message.empty())
      spdlog::info("{}", plan.message);
    if (dealt != nullptr && other_world)
      spdlog::warn(
          "--allow-batch-change: {} by world size, so the epoch in progress restarts from its beginning in a new order "
          "on {} ranks",
          dealt, rank.world_size);
  }
  TrainingConfig resumed = config;
  resumed.batch_size = plan.batch_size;
  resumed.grad_accum_steps = static_cast<int>(plan.grad_accum_steps);
  return resumed;
}

}  // namespace mnddp
