// SGD, AdamW, LARS or LAMB from the config, with the param groups of --no-decay-norm-bias; the
// warm-up + decay schedule.
#include "mnddp/optim/optim.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "mnddp/error.hpp"
#include "mnddp/optim/fused_adamw.hpp"
#include "mnddp/optim/fused_sgd.hpp"
#include "mnddp/optim/lamb.hpp"
#include "mnddp/optim/lars.hpp"

namespace mnddp {

namespace {

// The param groups of `groups` with their options: `decayed` for the first, `excluded` for the
// second; an empty group is left out unless `groups.keep_empty` (ZeRO) says otherwise.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> param_groups(const ParameterGroups& groups, const Options& decayed,
                                                            const Options& excluded) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  if (!groups.decay.empty() || groups.keep_empty) out.emplace_back(groups.decay, std::make_unique<Options>(decayed));
  if (!groups.no_decay.empty() || (groups.keep_empty && groups.split))
    out.emplace_back(groups.no_decay, std::make_unique<Options>(excluded));
  return out;
}

std::int64_t values_in(const std::vector<at::Tensor>& tensors) {
  std::int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  return total;
}

}  // namespace

bool excluded_from_decay(const at::Tensor& parameter) { return parameter.dim() <= 1; }

ParameterGroups split_parameter_groups(const torch::OrderedDict<std::string, at::Tensor>& named_parameters,
                                       bool no_decay_norm_bias) {
  ParameterGroups groups;
  for (const auto& item : named_parameters) {
    if (no_decay_norm_bias && excluded_from_decay(item.value())) {
      groups.no_decay_names.push_back(item.key());
      groups.no_decay.push_back(item.value());
    } else {
      groups.decay_names.push_back(item.key());
      groups.decay.push_back(item.value());
    }
  }
  return groups;
}

bool effective_no_decay_norm_bias(const TrainingConfig& config) {
  if (config.no_decay_norm_bias) return *config.no_decay_norm_bias;
  return config.optimizer != OptimizerKind::Sgd;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const TrainingConfig& config, const torch::OrderedDict<std::string, at::Tensor>& named_parameters) {
  const bool split = effective_no_decay_norm_bias(config);
  const ParameterGroups groups = split_parameter_groups(named_parameters, split);
  const bool adaptive = config.optimizer == OptimizerKind::Lars || config.optimizer == OptimizerKind::Lamb;
  if (split)
    spdlog::info(
        "optimizer {}: weight decay{} on {} tensors ({} values); not on the {} biases and norms ({} values; "
        "--no-decay-norm-bias)",
        choice_name(config.optimizer), adaptive ? " and trust ratio" : "", groups.decay.size(), values_in(groups.decay),
        groups.no_decay.size(), values_in(groups.no_decay));
  return make_optimizer(config, groups);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& config, const ParameterGroups& groups) {
  switch (config.optimizer) {
    case OptimizerKind::Sgd: {
      if (config.nesterov && config.momentum <= 0.0)
        throw UsageError("--nesterov: needs --momentum > 0 (got momentum 0)");
      auto options = torch::optim::SGDOptions(config.lr)
                         .momentum(config.momentum)
                         .nesterov(config.nesterov)
                         .weight_decay(config.weight_decay);
      auto excluded = options;
      excluded.weight_decay(0.0);
      return std::make_unique<FusedSgd>(param_groups(groups, options, excluded), options);
    }
    case OptimizerKind::AdamW: {
      auto options = torch::optim::AdamWOptions(config.lr)
                         .betas({config.beta1, config.beta2})
                         .eps(config.eps)
                         .weight_decay(config.weight_decay);
      auto excluded = options;
      excluded.weight_decay(0.0);
      return std::make_unique<FusedAdamW>(param_groups(groups, options, excluded), options);
    }
    case OptimizerKind::Lars: {
      auto options = LarsOptions(config.lr)
                         .momentum(config.momentum)
                         .weight_decay(config.weight_decay)
                         .eta(config.lars_eta)
                         .eps(config.eps);
      auto excluded = options;
      excluded.weight_decay(0.0).adapt(false);
      return std::make_unique<Lars>(param_groups(groups, options, excluded), options);
    }
    case OptimizerKind::Lamb: {
      auto options = LambOptions(config.lr)
                         .beta1(config.beta1)
                         .beta2(config.beta2)
                         .eps(config.eps)
                         .weight_decay(config.weight_decay);
      auto excluded = options;
      excluded.weight_decay(0.0).adapt(false);
      return std::make_unique<Lamb>(param_groups(groups, options, excluded), options);
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
