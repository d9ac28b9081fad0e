// Where each --inject-fault kind strikes: a few named hooks the trainer and the checkpointer call at
// fixed points. With no fault planned every hook does nothing. Each fault announces itself first
// ("[rank r@host] mnddp: injected fault KIND@STEP:RANK: what"), so the tests can tell it from a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "mnddp/fault/fault_plan.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

class FaultHooks {
 public:
  FaultHooks(FaultPlan plan, RankInfo rank) : plan_(plan), rank_(std::move(rank)) {}
  const FaultPlan& plan() const { return plan_; }

  // Before step `step`'s first collective: crash (SIGKILL), hang (for ever), slow (0.5 s from now on).
  void at_step_start(std::int64_t step) const;
  // On the loss of step `step`: true when this rank's loss is to become NaN (nan-loss).
  bool poisons_loss(std::int64_t step) const;
  // desync: true on the desync rank for the log interval of steps first_step..last_step that holds
  // STEP; that interval's metrics all-reduce then comes from "another place" (another label).
  bool desyncs_interval(std::int64_t first_step, std::int64_t last_step) const;
  // replica-drift: true after step `step`'s update on the drifting rank.
  bool drifts_replica(std::int64_t step) const;
  // The data loader's hook for an epoch whose first step is `first_step + 1` (loader-exception);
  // empty when no such fault is planned. Runs on the loader's thread.
  std::function<void(std::int64_t batch)> loader_hook(std::int64_t first_step, int grad_accum_steps) const;

  // Around the checkpoint write of step `step` (on the writing thread when asynchronous):
  void before_checkpoint_write(std::int64_t step, const std::string& directory) const;  // checkpoint-fill
  void after_checkpoint_arrays(std::int64_t step) const;  // checkpoint-kill, checkpoint-fail: before the commit
  void after_checkpoint_commit(std::int64_t step, const std::string& path) const;  // checkpoint-corrupt

 private:
  void announce(const std::string& what) const;

  FaultPlan plan_;
  RankInfo rank_;
};

}  // namespace mnddp
