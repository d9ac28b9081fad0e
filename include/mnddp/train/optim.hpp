// Optimizer construction and the learning-rate schedule, both driven by TrainingConfig.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "mnddp/config.hpp"

namespace mnddp {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& config,
                                                        const std::vector<at::Tensor>& parameters);

// Learning rate for optimizer step `step` (0-based) of `total_steps`: linear warm-up from 0 over
// warmup_steps, then constant, cosine or linear (down to min_lr at total_steps), or step decay.
// Equal to PyTorch's LinearLR warm-up followed (SequentialLR) by CosineAnnealingLR, LinearLR or
// StepLR (tests/interop/lr_schedules.sh).
double scheduled_lr(const TrainingConfig& config, std::int64_t step, std::int64_t total_steps);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace mnddp
