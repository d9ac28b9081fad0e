// TrainingConfig: defaults, precedence (CLI > env > file > default), validation messages and the
// --print-config round trip.
#include <gtest/gtest.h>

#include <fstream>

#include "config_args.hpp"
#include "mnddp/config.hpp"
#include "mnddp/error.hpp"
#include "test_support.hpp"

using mnddp::Environment;
using mnddp::TrainingConfig;
using mnddp::UsageError;
using mnddp::testing_support::parse_args;

namespace {

// The message of the UsageError that parsing `args` throws ("" if it does not throw).
std::string usage_error_of(const std::vector<std::string>& args, const Environment& env = {}) {
  return mnddp::testing_support::usage_error_or_empty([&] { parse_args(args, env); });
}

// The same without the test's --train-data.
std::string bare_usage_error_of(const std::vector<std::string>& args, const Environment& env = {}) {
  return mnddp::testing_support::usage_error_or_empty([&] { mnddp::parse_command_line(args, env); });
}

std::string write_file(const mnddp::testing_support::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Config, DefaultsWithoutAnyInput) {
  const auto parsed = parse_args({}, {});
  TrainingConfig expected;
  expected.train_data = "train_*.h5";
  EXPECT_EQ(parsed.config, expected);
  EXPECT_EQ(parsed.config.val_data, "") << "no validation unless --val-data is given";
  EXPECT_EQ(parsed.config.batch_size, 64);
  EXPECT_EQ(parsed.config.optimizer, mnddp::OptimizerKind::Sgd);
  EXPECT_FALSE(parsed.help);
}

// No default training data: a default path would train on, or validate against, files nobody named.
TEST(Config, TrainDataIsRequiredFromSomeSource) {
  const std::string required =
      "--train-data: required: name the training shards (a glob, a directory, a list file or a comma "
      "list) on the command line, in MNDDP_TRAIN_DATA or in a --config file (configs/demo.ini names the "
      "demo's)";
  EXPECT_EQ(bare_usage_error_of({}), required);
  EXPECT_EQ(bare_usage_error_of({"--lr", "0.1", "--val-data", "val.h5"}), required);
  EXPECT_EQ(bare_usage_error_of({"--train-data", "t.h5"}), "");
  EXPECT_EQ(bare_usage_error_of({}, {{"MNDDP_TRAIN_DATA", "t.h5"}}), "");
  mnddp::testing_support::TempDir dir;
  EXPECT_EQ(bare_usage_error_of({"--config", write_file(dir, "data.ini", "train-data = t.h5\n")}), "");
  EXPECT_EQ(bare_usage_error_of({"--config", write_file(dir, "none.ini", "lr = 0.1\n")}), required);
  EXPECT_TRUE(mnddp::parse_command_line({"--help"}, {}).help) << "--help needs no data";
}

TEST(Config, HasAtLeastTwentyFiveOptions) {
  const std::string markdown = mnddp::help_markdown();
  int rows = 0;
  for (std::size_t at = markdown.find("| `--"); at != std::string::npos; at = markdown.find("| `--", at + 1)) ++rows;
  EXPECT_GE(rows, 25);
}

TEST(Config, CommandLineWinsOverEnvironmentWhichWinsOverFile) {
  mnddp::testing_support::TempDir dir;
  const auto ini =
      write_file(dir, "run.ini", "train-data = t.h5\nlr = 0.3\nbatch-size = 16\nmodel = convnet\nepochs = 7\n");
  const Environment env = {{"MNDDP_LR", "0.2"}, {"MNDDP_BATCH_SIZE", "32"}, {"MNDDP_UNRELATED", "x"}};
  const auto parsed = parse_args({"--config", ini, "--lr", "0.1"}, env);
  EXPECT_DOUBLE_EQ(parsed.config.lr, 0.1);                         // CLI
  EXPECT_EQ(parsed.config.batch_size, 32);                         // env over file
  EXPECT_EQ(parsed.config.model.kind, mnddp::ModelKind::ConvNet);  // file over default
  EXPECT_EQ(parsed.config.epochs, 7);                              // file
  EXPECT_EQ(parsed.config.optimizer, mnddp::OptimizerKind::Sgd);   // default
  EXPECT_EQ(parsed.config_file, ini);
}

TEST(Config, ConfigFileFromEnvironment) {
  mnddp::testing_support::TempDir dir;
  const auto ini = write_file(dir, "env.ini", "train-data = t.h5\nhidden = 99\n");
  const auto parsed = parse_args({}, {{"MNDDP_CONFIG", ini}});
  EXPECT_EQ(parsed.config.hidden, 99);
}

TEST(Config, EnvironmentNames) {
  EXPECT_EQ(mnddp::env_name_for("batch-size"), "MNDDP_BATCH_SIZE");
  EXPECT_EQ(mnddp::env_name_for("lr"), "MNDDP_LR");
  const auto parsed = parse_args({}, {{"MNDDP_LOG_ALL_RANKS", "true"}, {"MNDDP_GRAD_ACCUM_STEPS", "4"}});
  EXPECT_TRUE(parsed.config.log_all_ranks);
  EXPECT_EQ(parsed.config.grad_accum_steps, 4);
}

TEST(Config, BareFlagMeansTrue) {
  EXPECT_TRUE(parse_args({"--log-all-ranks"}, {}).config.log_all_ranks);
  EXPECT_FALSE(parse_args({"--shuffle=false"}, {}).config.shuffle);
}

TEST(Config, NegativeLearningRateNamesOptionAndValue) {
  const auto message = usage_error_of({"--lr=-0.1"});
  EXPECT_NE(message.find("--lr"), std::string::npos) << message;
  EXPECT_NE(message.find("-0.1"), std::string::npos) << message;
}

TEST(Config, NonNumericLearningRate) {
  const auto message = usage_error_of({"--lr", "fast"});
  EXPECT_NE(message.find("lr"), std::string::npos) << message;
  EXPECT_NE(message.find("fast"), std::string::npos) << message;
}

TEST(Config, BadValueInEnvironmentNamesTheVariable) {
  const auto message = usage_error_of({}, {{"MNDDP_BATCH_SIZE", "many"}});
  EXPECT_NE(message.find("MNDDP_BATCH_SIZE"), std::string::npos) << message;
  EXPECT_NE(message.find("many"), std::string::npos) << message;
}

TEST(Config, BadValueInFileNamesTheFile) {
  mnddp::testing_support::TempDir dir;
  const auto ini = write_file(dir, "bad.ini", "epochs = three\n");
  const auto message = usage_error_of({"--config", ini});
  EXPECT_NE(message.find(ini), std::string::npos) << message;
  EXPECT_NE(message.find("three"), std::string::npos) << message;
}

TEST(Config, UnknownKeyInFile) {
  mnddp::testing_support::TempDir dir;
  const auto ini = write_file(dir, "typo.ini", "learning-rate = 0.1\n");
  const auto message = usage_error_of({"--config", ini});
  EXPECT_NE(message.find("learning-rate"), std::string::npos) << message;
}

TEST(Config, UnreadableConfigFile) {
  const auto message = usage_error_of({"--config", "/nonexistent/run.ini"});
  EXPECT_NE(message.find("--config"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/run.ini"), std::string::npos) << message;
}

TEST(Config, UnknownChoiceListsTheChoices) {
  const auto message = usage_error_of({"--model", "gpt5"});
  EXPECT_NE(message.find("--model"), std::string::npos) << message;
  EXPECT_NE(message.find("gpt5"), std::string::npos) << message;
  EXPECT_NE(message.find("convnet"), std::string::npos) << message;
}

TEST(Config, UnknownOptionAndNoGuessing) {
  EXPECT_NE(usage_error_of({"--no-such-option", "1"}).find("no-such-option"), std::string::npos);
  // "--lr-sched" must not silently become --lr-schedule.
  EXPECT_NE(usage_error_of({"--lr-sched", "cosine"}), "");
}

TEST(Config, RangeChecks) {
  EXPECT_NE(usage_error_of({"--batch-size=0"}), "");
  EXPECT_NE(usage_error_of({"--momentum=1.5"}), "");
  EXPECT_NE(usage_error_of({"--grad-accum-steps=0"}), "");
  EXPECT_NE(usage_error_of({"--collective-timeout=0"}), "");
  EXPECT_NE(usage_error_of({"--lr=nan"}), "");
  EXPECT_NE(usage_error_of({"--seed=-3"}), "");
  EXPECT_EQ(usage_error_of({"--momentum=0"}), "");
}

TEST(Config, PrintConfigRoundTrips) {
  TrainingConfig changed;
  changed.train_data = "/scratch/run 1/train_*.h5";
  changed.val_data = "";
  changed.lr = 0.1 + 0.2;  // not exactly representable: the text must carry every digit
  changed.weight_decay = 1e-5;
  changed.model = mnddp::parse_model_name("torchscript:/models/my net.pt");
  changed.amp = mnddp::Amp::BF16;
  changed.resume = mnddp::parse_resume_from("/ckpt/step-00000010.h5");
  changed.preempt_signals = {SIGUSR1, SIGXCPU};
  changed.inject_fault = mnddp::parse_fault_plan("slow@3:1");
  changed.shuffle = false;
  changed.seed = 1234567890123;
  changed.collective_timeout = 12.5;
  changed.checkpoint_dir = "ckpt";
  const std::string ini = mnddp::to_ini(changed);
  EXPECT_EQ(mnddp::parse_ini_text(ini), changed) << ini;

  mnddp::testing_support::TempDir dir;
  const auto path = write_file(dir, "printed.ini", ini);
  EXPECT_EQ(parse_args({"--config", path}, {}).config, changed);
}

// Values Boost's INI reader would change ('#' starts a comment, spaces around a value are trimmed, a
// line ends it) are written quoted, with escapes, and read back exactly; a user's file may quote too.
TEST(Config, ValuesThatAnIniLineCannotHoldAreQuoted) {
  TrainingConfig changed;
  changed.train_data = "/scratch/run#3/train_*.h5";
  changed.x_name = " padded ";
  changed.y_name = "\"quoted\" \\ and\nnewline";
  const std::string ini = mnddp::to_ini(changed);
  EXPECT_NE(ini.find("train-data = \"/scratch/run\\x233/train_*.h5\""), std::string::npos) << ini;
  EXPECT_NE(ini.find("x-name = \" padded \"\n"), std::string::npos) << "spaces kept by quotes";
  EXPECT_NE(ini.find("optimizer = sgd\n"), std::string::npos) << "plain values stay plain";
  EXPECT_EQ(mnddp::parse_ini_text(ini), changed) << ini;

  mnddp::testing_support::TempDir dir;
  EXPECT_EQ(
      parse_args({"--config", write_file(dir, "q.ini", "train-data = t.h5\nx-name = \"a\\x23b\"  # a comment\n")}, {})
          .config.x_name,
      "a#b");
  EXPECT_EQ(usage_error_of({"--config", write_file(dir, "bad.ini", "train-data = t.h5\nx-name = \"a\\qb\"\n")}),
            "--x-name: the quoted value \"a\\qb\" has an unknown escape \\q (known: \\\\ \\\" \\n \\r \\t \\xHH)");
}

// Boost formats its messages by replacing %tokens% until none is left: a value holding one looped
// for ever (found by fuzz_config). The message quotes the value as given, at once.
TEST(Config, AValueHoldingAPlaceholderIsQuotedNotExpandedForEver) {
  EXPECT_EQ(usage_error_of({"--lr=%value%"}), "the argument ('%value%') for option '--lr' is invalid");
  EXPECT_EQ(usage_error_of({"--batch-size", "%canonical_option% %prefix%"}),
            "the argument ('%canonical_option% %prefix%') for option '--batch-size' is invalid");
  EXPECT_EQ(usage_error_of({}, {{"MNDDP_EPOCHS", "%value%%value%"}}),
            "environment variable MNDDP_EPOCHS='%value%%value%': the argument ('%value%%value%') for option "
            "'epochs' is invalid");
}

TEST(Config, HelpIsGrouped) {
  const std::string help = mnddp::help_text();
  for (const char* group :
       {"Data:", "Model:", "Optimizer:", "Schedule:", "Training:", "Checkpoint:", "Logging:", "Distributed:"})
    EXPECT_NE(help.find(group), std::string::npos) << group;
  EXPECT_TRUE(parse_args({"--help"}, {}).help);
}

// A repeat is an error wherever it is: on the command line (which value was meant is a guess) as
// in the INI file.
TEST(Config, RepeatedOptionIsAnErrorNamingIt) {
  EXPECT_EQ(usage_error_of({"--lr", "0.1", "--batch-size=8", "--lr=0.4"}),
            "--lr: given more than once on the command line ('0.1', then '0.4'); give it once");
  mnddp::testing_support::TempDir dir;
  const auto path = write_file(dir, "twice.ini", "lr = 0.1\nbatch-size = 8\nlr = 0.4\n");
  const auto message = usage_error_of({"--config", path});
  EXPECT_NE(message.find("lr"), std::string::npos) << message;
  EXPECT_NE(message.find("more than once"), std::string::npos) << message;
  // The command line still beats the file and the environment: that is not a repeat.
  EXPECT_DOUBLE_EQ(parse_args({"--lr", "0.2", "--config", write_file(dir, "one.ini", "train-data = t.h5\nlr = 0.1\n")},
                              {{"MNDDP_LR", "0.3"}})
                       .config.lr,
                   0.2);
}

TEST(Config, MinLrAboveLrIsRefused) {
  EXPECT_EQ(usage_error_of({"--lr", "0.01", "--min-lr", "0.02"}),
            "--min-lr: must not exceed --lr (got min-lr 0.02, lr 0.01)");
  EXPECT_EQ(usage_error_of({"--lr", "0.01", "--min-lr", "0.01"}), "");
}

// A scripted module's BatchNorm layers cannot be swapped: asking for global statistics is an error,
// not a silent no-op. The zoo's models without BatchNorm accept the flag (a warning at set-up).
TEST(Config, SyncBatchNormRefusesTorchScript) {
  const std::string message = usage_error_of({"--sync-batchnorm", "--model", "torchscript:net.pt"});
  EXPECT_NE(message.find("--sync-batchnorm: the BatchNorm layers of --model torchscript:"), std::string::npos)
      << message;
  EXPECT_EQ(usage_error_of({"--sync-batchnorm", "--model", "resnet18"}), "");
  EXPECT_EQ(usage_error_of({"--sync-batchnorm", "--model", "mlp"}), "");
}
