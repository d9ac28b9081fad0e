// mnddp's learning-rate schedules against PyTorch's schedulers (tests/interop/lr_schedule_reference.py
// writes every step's learning rate for each case): within 1e-7 of the peak rate at every step.
// Usage: check_lr_schedules REFERENCE.json (tests/interop/lr_schedules.sh runs both).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mnddp/config.hpp"
#include "mnddp/optim/optim.hpp"

using namespace mnddp;

namespace {

std::string g_reference;

TEST(LrSchedules, EveryStepEqualsPyTorchsSchedulers) {
  std::ifstream in(g_reference);
  ASSERT_TRUE(in) << "cannot read " << g_reference;
  const auto doc = nlohmann::json::parse(in);
  ASSERT_GE(doc.at("cases").size(), 6u);
  for (const auto& c : doc.at("cases")) {
    TrainingConfig config;
    config.lr_schedule = parse_choice_or_throw<LrSchedule>(c.at("schedule").get<std::string>(), "--lr-schedule");
    config.lr = c.at("lr").get<double>();
    config.min_lr = c.value("min_lr", 0.0);
    config.lr_gamma = c.value("gamma", 0.1);
    config.lr_step_size = c.value("step_size", 1000);
    config.warmup_steps = c.at("warmup").get<std::int64_t>();
    const auto total = c.at("total").get<std::int64_t>();
    const auto expected = c.at("lrs").get<std::vector<double>>();
    ASSERT_EQ(static_cast<std::int64_t>(expected.size()), total);
    for (std::int64_t step = 0; step < total; ++step)
      ASSERT_NEAR(scheduled_lr(config, step, total), expected[static_cast<std::size_t>(step)], 1e-7 * config.lr)
          << c.at("schedule").get<std::string>() << " warm-up " << config.warmup_steps << " step " << step << " (torch "
          << doc.at("torch").get<std::string>() << ")";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_lr_schedules REFERENCE.json\n");
    return 2;
  }
  g_reference = argv[1];
  return RUN_ALL_TESTS();
}
