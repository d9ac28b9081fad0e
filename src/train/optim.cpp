// SGD / AdamW from the config, and the warm-up + decay schedule.
#include "mnddp/train/optim.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "mnddp/error.hpp"

namespace mnddp {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& config,
                                                        const std::vector<at::Tensor>& parameters) {
  if (config.optimizer == "sgd") {
    if (config.nesterov && config.momentum <= 0.0)
      throw UsageError("--nesterov: needs --momentum > 0 (got momentum 0)");
    auto options = torch::optim::SGDOptions(config.lr)
                       .momentum(config.momentum)
                       .nesterov(config.nesterov)
                       .weight_decay(config.weight_decay);
    return std::make_unique<torch::optim::SGD>(parameters, options);
  }
  if (config.optimizer == "adamw") {
    auto options = torch::optim::AdamWOptions(config.lr)
                       .betas({config.beta1, config.beta2})
                       .eps(config.eps)
                       .weight_decay(config.weight_decay);
    return std::make_unique<torch::optim::AdamW>(parameters, options);
  }
  throw UsageError("--optimizer: unknown optimizer '" + config.optimizer + "' (choose from sgd, adamw)");
}

double scheduled_lr(const TrainingConfig& config, std::int64_t step, std::int64_t total_steps) {
  if (step < config.warmup_steps)
    return config.lr * static_cast<double>(step + 1) / static_cast<double>(config.warmup_steps);
  const std::int64_t after = step - config.warmup_steps;
  if (config.lr_schedule == "cosine") {
    const std::int64_t span = std::max<std::int64_t>(1, total_steps - config.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
  }
  if (config.lr_schedule == "step")
    return config.lr * std::pow(config.lr_gamma, static_cast<double>(after / config.lr_step_size));
  return config.lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mnddp
