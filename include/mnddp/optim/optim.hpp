// Optimizer construction (with its parameter groups) and the learning-rate schedule, both driven by
// TrainingConfig.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/config.hpp"

namespace mnddp {

// The parameters of a model split for the optimizer: `decay` gets --weight-decay (and, with LARS and
// LAMB, the trust ratio); `no_decay` gets neither. A parameter goes into `no_decay` when the split
// is on and it has at most one dimension: every bias and every normalization weight and bias
// (BatchNorm, LayerNorm, GroupNorm), as PyTorch recipes do (`p.ndim <= 1`). Names keep the model's
// registration order.
struct ParameterGroups {
  std::vector<std::string> decay_names;
  std::vector<at::Tensor> decay;
  std::vector<std::string> no_decay_names;
  std::vector<at::Tensor> no_decay;
  // Under ZeRO every rank must have the same groups even where it holds no piece of them: LARS and
  // LAMB take collective norms per group. Then the decayed group is always made, and the excluded
  // one whenever the split is on (`split`); otherwise an empty group is left out.
  bool keep_empty = false;
  bool split = false;
};
bool excluded_from_decay(const at::Tensor& parameter);
ParameterGroups split_parameter_groups(const torch::OrderedDict<std::string, at::Tensor>& named_parameters,
                                       bool no_decay_norm_bias);

// --no-decay-norm-bias as it applies: the value given, else (auto) on for AdamW, LARS and LAMB and
// off for SGD.
bool effective_no_decay_norm_bias(const TrainingConfig& config);

// The optimizer of config.optimizer over the model's named parameters: one param group, or two with
// effective_no_decay_norm_bias (decayed first, then the excluded ones).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const TrainingConfig& config, const torch::OrderedDict<std::string, at::Tensor>& named_parameters);
// The same over groups split already (ZeRO's flat pieces, whose parameter decides their group).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingConfig& config, const ParameterGroups& groups);

// Learning rate for optimizer step `step` (0-based) of `total_steps`: linear warm-up from 0 over
// warmup_steps, then constant, cosine or linear (down to min_lr at total_steps), or step decay.
// Equal to PyTorch's LinearLR warm-up followed (SequentialLR) by CosineAnnealingLR, LinearLR or
// StepLR (tests/interop/lr_schedules.sh).
double scheduled_lr(const TrainingConfig& config, std::int64_t step, std::int64_t total_steps);

// Sets `lr` on every param group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace mnddp
