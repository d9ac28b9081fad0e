// mnddp's LossScaler against PyTorch's torch.amp.GradScaler on the same sequence of gradients
// (tests/interop/grad_scaler_reference.py writes it): every step's unscaled gradient, skip decision
// and scale after update() must agree, through overflows, a NaN and the growth steps after them.
// Usage: check_grad_scaler REFERENCE.json (tests/interop/grad_scaler.sh runs both).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "mnddp/amp/loss_scaler.hpp"

using namespace mnddp;

namespace {

std::string g_reference;

std::vector<float> decode(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values) {
    if (v.is_string()) {
      const std::string text = v.get<std::string>();
      out.push_back(text == "nan"   ? std::numeric_limits<float>::quiet_NaN()
                    : text == "inf" ? std::numeric_limits<float>::infinity()
                                    : -std::numeric_limits<float>::infinity());
    } else {
      out.push_back(v.get<float>());
    }
  }
  return out;
}

}  // namespace

TEST(GradScaler, LossScalerMakesTorchsDecisions) {
  std::ifstream in(g_reference);
  ASSERT_TRUE(in) << "cannot read the reference '" << g_reference << "'";
  const nlohmann::json reference = nlohmann::json::parse(in);
  LossScalerOptions options;
  options.enabled = true;
  options.init_scale = reference.at("init_scale").get<double>();
  options.growth_factor = reference.at("growth_factor").get<double>();
  options.backoff_factor = reference.at("backoff_factor").get<double>();
  options.growth_interval = reference.at("growth_interval").get<int>();
  LossScaler scaler(options, at::kCPU);

  int skipped = 0;
  int step = 0;
  for (const auto& expected : reference.at("steps")) {
    at::Tensor param = at::zeros({static_cast<std::int64_t>(expected.at("grad").size())});
    param.mutable_grad() = at::tensor(decode(expected.at("grad")));
    const bool finite = scaler.unscale({param});
    const at::Tensor unscaled = at::tensor(decode(expected.at("unscaled")));
    EXPECT_TRUE(at::allclose(param.grad(), unscaled, 1e-6, 0.0, /*equal_nan=*/true))
        << "step " << step << ": unscaled " << param.grad() << " vs torch " << unscaled;
    EXPECT_EQ(!finite, expected.at("skipped").get<bool>()) << "step " << step;
    scaler.update();
    EXPECT_DOUBLE_EQ(scaler.current_scale(), expected.at("scale").get<double>()) << "step " << step;
    skipped += finite ? 0 : 1;
    ++step;
  }
  EXPECT_EQ(step, 20);
  EXPECT_EQ(skipped, 4) << "the reference has four inf/NaN steps";
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_grad_scaler REFERENCE.json\n");
    return 2;
  }
  g_reference = argv[1];
  return RUN_ALL_TESTS();
}
