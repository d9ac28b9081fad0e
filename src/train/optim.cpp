// SGD / AdamW from the config, and the warm-up + decay schedule.
#include "mnddp/train/optim.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "mnddp/error.hpp"

namespace mnddp {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& config,
                                                        const std::vector<at::Tensor>& parameters) {
  switch (config.optimizer) {
    case OptimizerKind::Sgd: {
      if (config.nesterov && config.momentum <= 0.0)
        throw UsageError("--nesterov: needs --momentum > 0 (got momentum 0)");
      auto options = torch::optim::SGDOptions(config.lr)
                         .momentum(config.momentum)
                         .nesterov(config.nesterov)
                         .weight_decay(config.weight_decay);
      return std::make_unique<torch::optim::SGD>(parameters, options);
    }
    case OptimizerKind::AdamW: {
      auto options = torch::optim::AdamWOptions(config.lr)
                         .betas({config.beta1, config.beta2})
                         .eps(config.eps)
                         .weight_decay(config.weight_decay);
      return std::make_unique<torch::optim::AdamW>(parameters, options);
    }
  }
  throw std::logic_error("make_optimizer: unknown optimizer kind");
}

double scheduled_lr(const TrainingConfig& config, std::int64_t step, std::int64_t total_steps) {
  if (step < config.warmup_steps)
    return config.lr * static_cast<double>(step + 1) / static_cast<double>(config.warmup_steps);
  const std::int64_t after = step - config.warmup_steps;
  switch (config.lr_schedule) {
    case LrSchedule::Cosine: {
      const std::int64_t span = std::max<std::int64_t>(1, total_steps - config.warmup_steps);
      const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
    }
    case LrSchedule::Linear: {
      const std::int64_t span = std::max<std::int64_t>(1, total_steps - config.warmup_steps);
      const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      return config.lr + (config.min_lr - config.lr) * progress;
    }
    case LrSchedule::Step:
      return config.lr * std::pow(config.lr_gamma, static_cast<double>(after / config.lr_step_size));
    case LrSchedule::Constant:
      break;
  }
  return config.lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mnddp
