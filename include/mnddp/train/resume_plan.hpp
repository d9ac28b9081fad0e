// Before anything is built, a resumed run finds its checkpoint and decides its batch shape: it keeps
// the checkpoint's global batch (world size x --batch-size x --grad-accum-steps), and with it the
// global sample order, by changing the per-rank batch or the accumulation on another world size;
// where the new world size cannot divide it, the run refuses unless --allow-batch-change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/config.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

struct BatchShape {
  std::int64_t world_size = 1;
  std::int64_t batch_size = 1;  // per rank, per micro-step
  std::int64_t grad_accum_steps = 1;
  std::int64_t global() const { return world_size * batch_size * grad_accum_steps; }
  // "4 ranks x --batch-size 8 x --grad-accum-steps 2"
  std::string describe() const;
};

struct ResumeBatch {
  std::int64_t batch_size = 1;
  std::int64_t grad_accum_steps = 1;
  bool global_batch_changed = false;  // --allow-batch-change with another global batch
  std::string message;                // what changed, for the log; empty when nothing did
};

// Pure. `written`: the checkpoint's shape; `asked`: this run's world size and options.
// - The same global batch: `asked` as it is.
// - Another one with `allow_change`: `asked`, and a message saying the sample order changes.
// - Otherwise, where asked.world_size divides written.global(): the largest per-rank batch that
//   divides written.global() / asked.world_size and is at most asked.batch_size (so it fits where the
//   asked one did), with the accumulation making up the rest.
// - Otherwise UsageError naming `path`, the world sizes that would keep it, and --allow-batch-change.
ResumeBatch plan_resume_batch(const BatchShape& written, const BatchShape& asked, bool allow_change,
                              const std::string& path);

// Pure. The epoch's micro-batches already done, counted in `now`'s global micro-batches (world size x
// batch size) from `written`'s count in its own, and always a whole number of `now`'s steps. With
// another global batch the samples done are rounded down to whole new steps: `*repeated` gets how
// many samples of the epoch will be seen again (0 otherwise).
std::int64_t micro_batches_done_in(const TrainingPosition& written, const BatchShape& now, std::int64_t* repeated);

// The checkpoint --resume names (verified by every rank together) and how it was written.
struct ResumePoint {
  std::string path;
  TrainingPosition written;  // grad_accum_steps filled in from the stored config for older files
};

// Collective over `control`: nullopt when the run starts from scratch (logged).
std::optional<ResumePoint> find_resume_point(const TrainingConfig& config, MpiComm& control);

// What deals the data to ranks by world size, so that its order cannot continue on another
// ("--partition shard assigns files", "--shuffle-unit chunk deals chunks"), or nullptr.
const char* order_dealt_by_world_size(const TrainingConfig& config);

// `config` with the batch shape a resume from `point` trains with, the change logged on rank 0.
// Throws UsageError (every rank alike) where the checkpoint's order cannot continue: files or chunks
// dealt by world size (--partition shard, --shuffle-unit chunk) on another world size, or a global
// batch the new world size cannot divide (without --allow-batch-change). --shuffle-unit chunk keeps
// the checkpoint's --batch-size on the same world size (its chunks are made of it).
TrainingConfig with_resumed_batch(const TrainingConfig& config, const ResumePoint& point, const RankInfo& rank);

}  // namespace mnddp
