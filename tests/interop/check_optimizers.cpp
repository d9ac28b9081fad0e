// mnddp's optimizers (LARS, LAMB, AdamW, SGD; with and without the no-decay param group) against the
// published rules and torch.optim (tests/interop/optimizer_reference.py writes the tensors, the
// gradients of every step and the parameters expected after it): every tensor after every step
// within 1e-6 of the reference, relative to the tensor's largest value.
// Usage: check_optimizers REFERENCE.json (tests/interop/optimizers.sh runs both).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mnddp/config.hpp"
#include "mnddp/optim/optim.hpp"

using namespace mnddp;

namespace {

std::string g_reference;

at::Tensor tensor_of(const nlohmann::json& values, const std::vector<std::int64_t>& shape) {
  return at::tensor(values.get<std::vector<float>>(), at::kFloat).reshape(shape);
}

std::optional<bool> auto_bool(const std::string& text) {
  if (text == "auto") return std::nullopt;
  return text == "true";
}

TEST(Optimizers, EveryStepEqualsTheReference) {
  std::ifstream in(g_reference);
  ASSERT_TRUE(in) << "cannot read " << g_reference;
  const auto doc = nlohmann::json::parse(in);
  const auto lrs = doc.at("lrs").get<std::vector<double>>();
  const auto& steps = doc.at("gradients");
  ASSERT_EQ(steps.size(), lrs.size());
  ASSERT_GE(steps.size(), 5u);
  ASSERT_GE(doc.at("cases").size(), 8u);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& p : doc.at("parameters")) shapes[p.at("name")] = p.at("shape").get<std::vector<std::int64_t>>();

  for (const auto& c : doc.at("cases")) {
    const std::string name = c.at("name");
    TrainingConfig config;
    config.optimizer = parse_choice_or_throw<OptimizerKind>(c.at("optimizer").get<std::string>(), "--optimizer");
    config.lr = lrs.front();
    config.momentum = c.at("momentum");
    config.nesterov = c.at("nesterov");
    config.weight_decay = c.at("weight_decay");
    config.beta1 = c.at("beta1");
    config.beta2 = c.at("beta2");
    config.eps = c.at("eps");
    config.lars_eta = c.at("lars_eta");
    config.no_decay_norm_bias = auto_bool(c.at("no_decay_norm_bias"));
    ASSERT_EQ(effective_no_decay_norm_bias(config), c.at("split").get<bool>()) << name;

    torch::OrderedDict<std::string, at::Tensor> named;
    for (const auto& p : doc.at("parameters")) {
      at::Tensor t = tensor_of(p.at("values"), shapes[p.at("name")]);
      named.insert(p.at("name").get<std::string>(), t.set_requires_grad(true));
    }
    auto optimizer = make_optimizer(config, named);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      set_learning_rate(*optimizer, lrs[k]);
      for (auto& item : named) {
        const auto& grad = steps[k].at(item.key());
        item.value().mutable_grad() = grad.is_null() ? at::Tensor() : tensor_of(grad, shapes[item.key()]);
      }
      optimizer->step();
      for (const auto& item : named) {
        const at::Tensor expected = tensor_of(c.at("expected")[k].at(item.key()), shapes[item.key()]);
        const double scale = std::max(expected.abs().max().item<double>(), 1e-6);
        const double error = (item.value().detach() - expected).abs().max().item<double>() / scale;
        EXPECT_LE(error, 1e-6) << name << ": '" << item.key() << "' after step " << k + 1 << " (torch "
                               << doc.at("torch").get<std::string>() << ")\n  mnddp     " << item.value()
                               << "\n  reference " << expected;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_optimizers REFERENCE.json\n");
    return 2;
  }
  g_reference = argv[1];
  return RUN_ALL_TESTS();
}
