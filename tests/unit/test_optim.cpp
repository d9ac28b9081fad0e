// The param groups of --no-decay-norm-bias: which parameters of real models go without weight decay
// (by name and shape), what each optimizer's groups are set to, the option's per-optimizer default,
// and that the learning rate reaches every group.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <string>
#include <vector>

#include "config_args.hpp"
#include "mnddp/config.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/optim/lamb.hpp"
#include "mnddp/optim/lars.hpp"
#include "mnddp/optim/optim.hpp"
#include "test_support.hpp"

using namespace mnddp;
using mnddp::testing_support::parse_args;
using Names = std::vector<std::string>;

namespace {

// One of each kind of layer a model here has.
struct Zoo : torch::nn::Module {
  Zoo() {
    register_module("embed", torch::nn::Embedding(10, 4));
    register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    register_module("bn", torch::nn::BatchNorm2d(4));
    register_module("fc", torch::nn::Linear(4, 2));
    register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({2})));
    register_module("gn", torch::nn::GroupNorm(torch::nn::GroupNormOptions(2, 4)));
    register_module("head", torch::nn::Linear(torch::nn::LinearOptions(2, 2).bias(false)));
  }
};

TrainingConfig config_for(OptimizerKind kind, std::optional<bool> no_decay = std::nullopt) {
  TrainingConfig config;
  config.optimizer = kind;
  config.weight_decay = 0.05;
  config.no_decay_norm_bias = no_decay;
  return config;
}

TEST(ParameterGroups, BiasesAndNormsByShapeInRegistrationOrder) {
  Zoo zoo;
  const ParameterGroups groups = split_parameter_groups(zoo.named_parameters(), true);
  EXPECT_EQ(groups.decay_names, (Names{"embed.weight", "conv.weight", "fc.weight", "head.weight"}));
  ASSERT_EQ(groups.no_decay_names,
            (Names{"conv.bias", "bn.weight", "bn.bias", "fc.bias", "ln.weight", "ln.bias", "gn.weight", "gn.bias"}));
  ASSERT_EQ(groups.decay.size(), groups.decay_names.size());
  ASSERT_EQ(groups.no_decay.size(), groups.no_decay_names.size());
  EXPECT_TRUE(groups.no_decay[1].is_same(zoo.named_parameters()["bn.weight"]));

  const ParameterGroups off = split_parameter_groups(zoo.named_parameters(), false);
  EXPECT_EQ(off.decay_names.size(), zoo.parameters().size());
  EXPECT_TRUE(off.no_decay_names.empty());
}

TEST(ParameterGroups, ResNetExcludesEveryBatchNormAndBias) {
  ModelSpec resnet;
  resnet.kind = ModelKind::Resnet18;
  resnet.input_shape = {3, 32, 32};
  resnet.num_outputs = 10;
  const auto model = make_model(resnet);
  const ParameterGroups groups = split_parameter_groups(model->named_parameters(), true);
  // torchvision's names: BatchNorms are bn1, bn2, ... and downsample.1.
  auto is_norm = [](const std::string& name) {
    return name.find("bn") != std::string::npos || name.find("downsample.1.") != std::string::npos;
  };
  for (const auto& name : groups.no_decay_names) EXPECT_TRUE(name.ends_with(".bias") || is_norm(name)) << name;
  for (const auto& name : groups.decay_names) EXPECT_TRUE(name.ends_with(".weight") && !is_norm(name)) << name;
  // torchvision's ResNet-18: 20 BatchNorms (weight and bias each), the classifier's bias.
  EXPECT_EQ(groups.no_decay_names.size(), 41u);
  EXPECT_EQ(groups.decay_names.size(), 21u);  // 20 convolutions, the classifier
}

TEST(ParameterGroups, DefaultIsOnExceptForSgd) {
  EXPECT_FALSE(effective_no_decay_norm_bias(config_for(OptimizerKind::Sgd)));
  EXPECT_TRUE(effective_no_decay_norm_bias(config_for(OptimizerKind::AdamW)));
  EXPECT_TRUE(effective_no_decay_norm_bias(config_for(OptimizerKind::Lars)));
  EXPECT_TRUE(effective_no_decay_norm_bias(config_for(OptimizerKind::Lamb)));
  EXPECT_TRUE(effective_no_decay_norm_bias(config_for(OptimizerKind::Sgd, true)));
  EXPECT_FALSE(effective_no_decay_norm_bias(config_for(OptimizerKind::Lamb, false)));
}

TEST(ParameterGroups, EachOptimizerGetsDecayOnlyInItsFirstGroup) {
  Zoo zoo;
  const auto named = zoo.named_parameters();
  {
    auto sgd = make_optimizer(config_for(OptimizerKind::Sgd), named);
    ASSERT_EQ(sgd->param_groups().size(), 1u);
    EXPECT_EQ(static_cast<torch::optim::SGDOptions&>(sgd->param_groups()[0].options()).weight_decay(), 0.05);
    auto split = make_optimizer(config_for(OptimizerKind::Sgd, true), named);
    ASSERT_EQ(split->param_groups().size(), 2u);
    EXPECT_EQ(static_cast<torch::optim::SGDOptions&>(split->param_groups()[1].options()).weight_decay(), 0.0);
  }
  {
    auto adamw = make_optimizer(config_for(OptimizerKind::AdamW), named);
    ASSERT_EQ(adamw->param_groups().size(), 2u);
    EXPECT_EQ(adamw->param_groups()[0].params().size(), 4u);
    EXPECT_EQ(adamw->param_groups()[1].params().size(), 8u);
    EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(adamw->param_groups()[0].options()).weight_decay(), 0.05);
    EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(adamw->param_groups()[1].options()).weight_decay(), 0.0);
    EXPECT_EQ(make_optimizer(config_for(OptimizerKind::AdamW, false), named)->param_groups().size(), 1u);
  }
  {
    auto lars = make_optimizer(config_for(OptimizerKind::Lars), named);
    ASSERT_EQ(lars->param_groups().size(), 2u);
    const auto& decayed = static_cast<LarsOptions&>(lars->param_groups()[0].options());
    const auto& excluded = static_cast<LarsOptions&>(lars->param_groups()[1].options());
    EXPECT_TRUE(decayed.adapt());
    EXPECT_EQ(decayed.weight_decay(), 0.05);
    EXPECT_FALSE(excluded.adapt());
    EXPECT_EQ(excluded.weight_decay(), 0.0);
    EXPECT_EQ(excluded.momentum(), decayed.momentum());
  }
  {
    auto lamb = make_optimizer(config_for(OptimizerKind::Lamb), named);
    ASSERT_EQ(lamb->param_groups().size(), 2u);
    EXPECT_TRUE(static_cast<LambOptions&>(lamb->param_groups()[0].options()).adapt());
    EXPECT_FALSE(static_cast<LambOptions&>(lamb->param_groups()[1].options()).adapt());
    EXPECT_EQ(static_cast<LambOptions&>(lamb->param_groups()[1].options()).weight_decay(), 0.0);
    auto one = make_optimizer(config_for(OptimizerKind::Lamb, false), named);
    ASSERT_EQ(one->param_groups().size(), 1u);
    EXPECT_TRUE(static_cast<LambOptions&>(one->param_groups()[0].options()).adapt());
  }
}

TEST(ParameterGroups, LearningRateReachesEveryGroup) {
  Zoo zoo;
  for (auto kind : {OptimizerKind::Sgd, OptimizerKind::AdamW, OptimizerKind::Lars, OptimizerKind::Lamb}) {
    auto optimizer = make_optimizer(config_for(kind, true), zoo.named_parameters());
    set_learning_rate(*optimizer, 0.125);
    for (const auto& group : optimizer->param_groups()) EXPECT_EQ(group.options().get_lr(), 0.125);
  }
}

TEST(OptimizerOptions, BadValuesAreUsageErrorsNamingTheOption) {
  using testing_support::usage_error_of;
  const Environment none;
  auto parse = [&](std::vector<std::string> args) { return parse_args(args, none); };
  EXPECT_EQ(usage_error_of([&] { parse({"--lars-eta", "-1"}); }), "--lars-eta: must be > 0 (got '-1')");
  EXPECT_EQ(usage_error_of([&] {
              parse({"--optimizer", "lamb", "--nesterov"});
            }),
            "--nesterov: only --optimizer sgd has Nesterov momentum (got --optimizer lamb)");
  EXPECT_EQ(usage_error_of([&] {
              parse({"--no-decay-norm-bias", "maybe"});
            }),
            "--no-decay-norm-bias: must be auto, true or false (got 'maybe')");
  EXPECT_EQ(parse({"--optimizer", "lars"}).config.no_decay_norm_bias, std::nullopt);
  EXPECT_EQ(parse({"--no-decay-norm-bias"}).config.no_decay_norm_bias, std::optional<bool>(true));
  EXPECT_EQ(parse({"--no-decay-norm-bias=false"}).config.no_decay_norm_bias, std::optional<bool>(false));
  EXPECT_EQ(parse({"--no-decay-norm-bias", "false"}).config.no_decay_norm_bias, std::optional<bool>(false));
  EXPECT_EQ(parse_args({}, {{"MNDDP_NO_DECAY_NORM_BIAS", "off"}}).config.no_decay_norm_bias,
            std::optional<bool>(false));
  TrainingConfig config = parse({"--optimizer", "lamb", "--no-decay-norm-bias", "false", "--lars-eta", "0.02"}).config;
  EXPECT_EQ(parse_ini_text(to_ini(config)), config);
}

}  // namespace
