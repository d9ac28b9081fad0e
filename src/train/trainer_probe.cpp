// What mnddp plan reads from a Trainer besides the loop's phases: the reducer (its gradient-ready
// times and bucket keys) and the state's sizes and snapshot time.
#include <chrono>

#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/ddp/reducer.hpp"
#include "mnddp/train/trainer.hpp"
#include "training_run.hpp"

namespace mnddp {

void Trainer::add_observer(RunObserver& observer) { run_->observers.add(observer); }

Reducer& Trainer::reducer() { return run_->ddp->reducer(); }

Trainer::StateSizes Trainer::measure_state() {
  TrainingRun& r = *run_;
  StateSizes sizes;
  for (const auto& p : r.model->parameters()) sizes.parameters += static_cast<double>(p.nbytes());
  for (const auto& b : r.model->buffers()) sizes.parameters += static_cast<double>(b.nbytes());
  for (std::size_t bytes : reducer().gradient_bytes()) sizes.gradients += static_cast<double>(bytes);
  // What the asynchronous checkpoint's snapshot does: the whole state copied to host memory.
  const auto begin = std::chrono::steady_clock::now();
  const StateSnapshot snapshot = take_snapshot(r.control, r.state_refs(), TrainingPosition{}, "", /*copy=*/true);
  sizes.snapshot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  sizes.optimizer_state = std::max(0.0, static_cast<double>(snapshot.bytes()) - sizes.parameters);
  return sizes;
}

}  // namespace mnddp
