// The choice options: each enum's names drive parsing, --help, the error text, the INI round trip
// and docs/CONFIG.md, so they cannot drift apart.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "config_args.hpp"
#include "mnddp/config.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

using namespace mnddp;
using mnddp::testing_support::parse_args;

namespace {

template <Choice E>
void expect_names_round_trip() {
  const auto names = choice_names<E>();
  ASSERT_FALSE(names.empty());
  for (const auto& [value, name] : ChoiceNames<E>::table) {
    EXPECT_EQ(parse_choice<E>(name), value) << name;
    EXPECT_EQ(choice_name(value), name);
  }
  EXPECT_FALSE(parse_choice<E>("no-such-choice").has_value());
  EXPECT_FALSE(parse_choice<E>(names.front() + " ").has_value()) << "names match exactly";
}

// Every value of one choice option, set through the command line, comes back from to_ini.
// `companions`: options a value needs beside it (--model gpt needs --task lm).
template <Choice E>
void expect_option_takes_every_value(const std::string& option, E TrainingConfig::*field,
                                     std::function<std::vector<std::string>(E)> companions = {}) {
  for (const auto& [value, name] : ChoiceNames<E>::table) {
    std::vector<std::string> args = {"--" + option, std::string(name)};
    if (companions) {
      const auto more = companions(value);
      args.insert(args.end(), more.begin(), more.end());
    }
    const TrainingConfig parsed = parse_args(args, {}).config;
    EXPECT_EQ(parsed.*field, value) << option << " " << name;
    EXPECT_EQ(parse_ini_text(to_ini(parsed)), parsed) << option << " " << name;
    EXPECT_NE(help_text().find(std::string(name)), std::string::npos) << name;
  }
  const std::string message = testing_support::usage_error_of([&] { parse_args({"--" + option, "bogus"}, {}); });
  EXPECT_EQ(message, fmt::format("--{}: must be one of {} (got 'bogus')", option, choice_list<E>()));
}

}  // namespace

TEST(Choices, EveryEnumRoundTripsThroughItsNames) {
  expect_names_round_trip<Amp>();
  expect_names_round_trip<PartitionMode>();
  expect_names_round_trip<NonfinitePolicy>();
  expect_names_round_trip<NonfiniteGradients>();
  expect_names_round_trip<GradCompression>();
  expect_names_round_trip<Backend>();
  expect_names_round_trip<DeviceRequest>();
  expect_names_round_trip<OptimizerKind>();
  expect_names_round_trip<LrSchedule>();
  expect_names_round_trip<ModelKind>();
  expect_names_round_trip<TaskKind>();
  expect_names_round_trip<Stem>();
  expect_names_round_trip<RegressionLoss>();
  expect_names_round_trip<LogLevel>();
  expect_names_round_trip<ProgressMode>();
  expect_names_round_trip<FaultKind>();
}

TEST(Choices, EveryChoiceOptionParsesPrintsAndRejectsFromTheSameNames) {
  expect_option_takes_every_value("amp", &TrainingConfig::amp);
  expect_option_takes_every_value("partition", &TrainingConfig::partition);
  expect_option_takes_every_value("nonfinite-inputs", &TrainingConfig::nonfinite_inputs);
  expect_option_takes_every_value("on-nonfinite", &TrainingConfig::on_nonfinite);
  expect_option_takes_every_value("grad-compression", &TrainingConfig::grad_compression);
  expect_option_takes_every_value("backend", &TrainingConfig::backend);
  expect_option_takes_every_value("device", &TrainingConfig::device);
  expect_option_takes_every_value("optimizer", &TrainingConfig::optimizer);
  expect_option_takes_every_value("lr-schedule", &TrainingConfig::lr_schedule);
  expect_option_takes_every_value<TaskKind>("task", &TrainingConfig::task, [](TaskKind task) {
    return task == TaskKind::Lm ? std::vector<std::string>{"--model", "gpt"} : std::vector<std::string>{};
  });
  expect_option_takes_every_value("loss", &TrainingConfig::loss);
  expect_option_takes_every_value("stem", &TrainingConfig::stem);
  expect_option_takes_every_value("log-level", &TrainingConfig::log_level);
}

// --model takes every zoo name, and torchscript:PATH with the file made absolute; both round-trip.
TEST(Choices, ModelTakesEveryZooNameAndATorchscriptFile) {
  for (const auto& [kind, name] : ChoiceNames<ModelKind>::table) {
    if (kind == ModelKind::Torchscript) continue;
    std::vector<std::string> args = {"--model", std::string(name)};
    if (kind == ModelKind::Gpt) args.insert(args.end(), {"--task", "lm"});
    const TrainingConfig parsed = parse_args(args, {}).config;
    EXPECT_EQ(parsed.model.kind, kind) << name;
    EXPECT_EQ(parsed.model.text(), name);
    EXPECT_EQ(parse_ini_text(to_ini(parsed)), parsed) << name;
  }
  const TrainingConfig scripted = parse_args({"--model", "torchscript:/models/../models/net.pt"}, {}).config;
  EXPECT_EQ(scripted.model.kind, ModelKind::Torchscript);
  EXPECT_EQ(scripted.model.path, "/models/net.pt");
  EXPECT_EQ(parse_ini_text(to_ini(scripted)), scripted);
  const TrainingConfig relative = parse_args({"--model", "torchscript:net.pt"}, {}).config;
  EXPECT_TRUE(relative.model.path.starts_with("/")) << relative.model.path;
  EXPECT_TRUE(relative.model.path.ends_with("/net.pt")) << relative.model.path;
  // A language model may be the user's own: the task is checked against its output at load time.
  EXPECT_NO_THROW(parse_args({"--model", "torchscript:lm.pt", "--task", "lm"}, {}));

  const std::string zoo =
      "--model: must be one of mlp, convnet, resnet18, resnet34, resnet50, resnet101, resnet152, cnn3d, vit, gpt, or ";
  EXPECT_EQ(testing_support::usage_error_of([] {
              parse_args({"--model", "bogus"}, {});
            }),
            zoo + "torchscript:PATH (got 'bogus')");
  EXPECT_EQ(testing_support::usage_error_of([] {
              parse_args({"--model", "torchscript"}, {});
            }),
            zoo + "torchscript:PATH (got 'torchscript')");
  EXPECT_EQ(testing_support::usage_error_of([] {
              parse_args({"--model", "torchscript:"}, {});
            }),
            "--model torchscript: needs the module's file, as torchscript:PATH");
}

TEST(Choices, HelpAndReferenceListTheChoices) {
  // --help wraps long descriptions: compare with every run of white space as one space.
  std::string help;
  for (char c : help_text()) {
    const bool space = c == ' ' || c == '\n';
    if (!space || help.empty() || help.back() != ' ') help += space ? ' ' : c;
  }
  for (const char* list :
       {"(mlp | convnet | resnet18 | resnet34 | resnet50 | resnet101 | resnet152 | cnn3d | vit | gpt | "
        "torchscript:PATH)",
        "(auto | cifar | imagenet)", "(classification | regression | lm)", "(mse | huber)",
        "(sgd | adamw | lars | lamb)", "(constant | cosine | step | linear)", "(off | bf16 | fp16)",
        "(auto | nccl | mpi)", "(auto | cpu | cuda)", "(none | bf16 | fp16)"})
    EXPECT_NE(help.find(list), std::string::npos) << list;
  const std::string reference = help_markdown();
  EXPECT_NE(reference.find("| `--amp` | `MNDDP_AMP` | off \\| bf16 \\| fp16 |"), std::string::npos) << reference;
}

TEST(Choices, TypedValuesRoundTripAndRejectBadText) {
  const TrainingConfig parsed =
      parse_args({"--resume", "none", "--preempt-signals", "SIGUSR1,XCPU,10", "--inject-fault", "hang@7:1"}, {}).config;
  EXPECT_EQ(parsed.resume.mode, ResumeFrom::Mode::None);
  EXPECT_EQ(parsed.preempt_signals, (std::vector<int>{SIGUSR1, SIGXCPU, 10}));
  EXPECT_EQ(parsed.inject_fault, (FaultPlan{FaultKind::Hang, 7, 1}));
  EXPECT_EQ(parse_ini_text(to_ini(parsed)), parsed);
  EXPECT_NE(testing_support::usage_error_of([] {
              parse_args({"--inject-fault", "melt@3"}, {});
            }).find("unknown fault 'melt'"),
            std::string::npos);
  EXPECT_NE(testing_support::usage_error_of([] {
              parse_args({"--preempt-signals", "KILL"}, {});
            }).find("--preempt-signals: 'KILL'"),
            std::string::npos);
  EXPECT_NE(testing_support::usage_error_of([] {
              parse_args({"--resume", ""}, {});
            }).find("--resume"),
            std::string::npos);
}
