// Parsing TrainingConfig with Boost.Program_options: command line > MNDDP_* environment > INI file >
// defaults. Boost keeps the first value stored for an option, so sources are stored in that order.
#include "mnddp/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_ini_value.hpp"
#include "config_table.hpp"
#include "mnddp/error.hpp"
#include "mnddp/program_options_message.hpp"

namespace mnddp {
namespace {

namespace po = boost::program_options;
using config_detail::ini_value;
using config_detail::option_groups;
using config_detail::option_table;
using config_detail::read_ini;

constexpr const char* kEnvPrefix = "MNDDP_";
constexpr unsigned kHelpWidth = 110;  // columns of --help; descriptions start halfway

// All training options bound to `target`, one Boost group per table group.
po::options_description training_options(TrainingConfig& target, const TrainingConfig& defaults,
                                         unsigned line_length = po::options_description::m_default_line_length) {
  po::options_description all("Training options (also MNDDP_<NAME> environment variables and --config file keys)",
                              line_length, line_length / 2);
  for (const auto& group : option_groups()) {
    po::options_description section(group, line_length, line_length / 2);
    for (const auto& row : option_table())
      if (row.group == group) row.bind(section, target, defaults);
    all.add(section);
  }
  return all;
}

po::options_description action_options() {
  po::options_description actions("General");
  actions.add_options()("help,h", "print this help and exit")("help-markdown",
                                                              "print the option reference as Markdown and exit")(
      "print-config", "print the resolved configuration as an INI file and exit")(
      "config", po::value<std::string>(), "INI file with option = value lines (env: MNDDP_CONFIG)");
  return actions;
}

// A table cell: a '|' inside it (the choices "a | b") would end the cell.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (char c : text) cell += c == '|' ? std::string("\\|") : std::string(1, c);
  return cell;
}

// Boost messages look like "the argument ('x') for option '--lr' is invalid"; keep them, add where.
[[noreturn]] void rethrow_as_usage(const po::error& e, const std::string& where) {
  const std::string message = program_options_message(e);
  throw UsageError(where.empty() ? message : fmt::format("{}: {}", where, message));
}

// An option given twice on the command line is an error, as it is in the INI file: which one was
// meant is a guess. (Scripts that set a default a user may override use MNDDP_* variables, which
// the command line beats.)
po::parsed_options reject_repeated(po::parsed_options parsed) {
  for (auto it = parsed.options.begin(); it != parsed.options.end(); ++it) {
    if (it->string_key.empty()) continue;
    const auto again = std::find_if(std::next(it), parsed.options.end(),
                                    [&](const po::option& o) { return o.string_key == it->string_key; });
    if (again == parsed.options.end()) continue;
    auto text = [](const po::option& o) { return o.value.empty() ? std::string("(no value)") : o.value.front(); };
    throw UsageError(fmt::format("--{}: given more than once on the command line ('{}', then '{}'); give it once",
                                 it->string_key, text(*it), text(*again)));
  }
  return parsed;
}

void store_environment(const Environment& env, const po::options_description& desc, po::variables_map& vm) {
  for (const auto& [key, value] : env) {
    if (key.rfind(kEnvPrefix, 0) != 0 || key == "MNDDP_CONFIG") continue;
    std::string name;
    for (const auto& row : option_table())
      if (env_name_for(row.name) == key) name = row.name;
    if (name.empty()) continue;  // other MNDDP_* variables (test harness, scripts) are not options
    po::parsed_options parsed(&desc);
    parsed.options.emplace_back(name, std::vector<std::string>{value});
    try {
      po::store(parsed, vm);
    } catch (const po::error& e) {
      throw UsageError(fmt::format("environment variable {}='{}': {}", key, value, program_options_message(e)));
    }
  }
}

void store_config_file(const std::string& path, const po::options_description& desc, po::variables_map& vm) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw UsageError(fmt::format("--config: '{}' is a directory, not an INI file", path));
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--config: cannot read '{}': {}", path, std::strerror(errno)));
  try {
    po::store(read_ini(in, desc), vm);
  } catch (const po::error& e) {
    rethrow_as_usage(e, fmt::format("config file '{}'", path));
  }
}

}  // namespace

std::string env_name_for(const std::string& option) {
  std::string name = kEnvPrefix;
  for (char c : option)
    name += (c == '-' || c == '.') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env,
                                     const std::string& base_ini) {
  ParsedCommandLine result;
  const TrainingConfig defaults;
  po::options_description training = training_options(result.config, defaults);
  po::options_description all;
  all.add(action_options()).add(training);

  po::variables_map vm;
  try {
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(reject_repeated(po::command_line_parser(args).options(all).style(style).run()), vm);
  } catch (const po::error& e) {
    rethrow_as_usage(e, "");
  }
  result.help = vm.count("help") > 0;
  result.help_markdown = vm.count("help-markdown") > 0;
  result.print_config = vm.count("print-config") > 0;
  if (result.help || result.help_markdown) return result;

  store_environment(env, training, vm);
  if (vm.count("config")) {
    result.config_file = vm["config"].as<std::string>();
  } else if (auto it = env.find("MNDDP_CONFIG"); it != env.end() && !it->second.empty()) {
    result.config_file = it->second;
  }
  if (!result.config_file.empty()) store_config_file(result.config_file, training, vm);
  if (!base_ini.empty()) {
    std::istringstream in(base_ini);
    try {
      po::store(read_ini(in, training), vm);  // stored last: every other source wins
    } catch (const po::error& e) {
      rethrow_as_usage(e, "the checkpoint's configuration");
    }
  }

  try {
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_as_usage(e, "");
  }
  validate(result.config);
  return result;
}

TrainingConfig parse_ini_text(const std::string& text) {
  TrainingConfig config;
  const TrainingConfig defaults;
  po::options_description training = training_options(config, defaults);
  po::variables_map vm;
  std::istringstream in(text);
  try {
    po::store(read_ini(in, training), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_as_usage(e, "configuration text");
  }
  return config;
}

void validate(const TrainingConfig& config) {
  // No default: a default path would train on, or validate against, files the user never named.
  if (config.train_data.empty())
    throw UsageError(
        "--train-data: required: name the training shards (a glob, a directory, a list file or a comma "
        "list) on the command line, in MNDDP_TRAIN_DATA or in a --config file (configs/demo.ini names the "
        "demo's)");
  for (const auto& row : option_table()) row.check(config);
  // The rules between options: each names both.
  if (config.steps_per_run > 0 && config.checkpoint_dir.empty())
    throw UsageError(fmt::format("--steps-per-run {}: needs --checkpoint-dir, or the next run could not continue",
                                 config.steps_per_run));
  if (!config.local_checkpoint_dir.empty() && config.checkpoint_dir.empty())
    throw UsageError(
        fmt::format("--local-checkpoint-dir '{}': needs --checkpoint-dir (the node-local level is a "
                    "fast copy in front of it, which every run can be resumed from)",
                    config.local_checkpoint_dir));
  if (config.local_checkpoint_dir.empty() != (config.local_checkpoint_interval == 0))
    throw UsageError(config.local_checkpoint_dir.empty()
                         ? fmt::format("--local-checkpoint-interval {}: needs --local-checkpoint-dir",
                                       config.local_checkpoint_interval)
                         : fmt::format("--local-checkpoint-dir '{}': needs --local-checkpoint-interval (steps "
                                       "between node-local checkpoints)",
                                       config.local_checkpoint_dir));
  if (config.nesterov && config.optimizer != OptimizerKind::Sgd)
    throw UsageError(fmt::format("--nesterov: only --optimizer sgd has Nesterov momentum (got --optimizer {})",
                                 choice_name(config.optimizer)));
  if (!config.keep_best.empty() && (config.checkpoint_dir.empty() || config.val_data.empty()))
    throw UsageError(
        fmt::format("--keep-best {}: needs --checkpoint-dir and --val-data (it keeps the checkpoint "
                    "that validates best)",
                    config.keep_best));
  if (config.min_lr > config.lr)
    throw UsageError(fmt::format("--min-lr: must not exceed --lr (got min-lr {}, lr {})", config.min_lr, config.lr));
  // Token models read token ids; the zoo's others read float samples. A TorchScript module may
  // be either: one forward pass at load time checks it against the task.
  const ModelKind kind = config.model.kind;
  if (kind != ModelKind::Torchscript) {
    const bool token_model = kind == ModelKind::Gpt;
    if (token_model != (config.task == TaskKind::Lm))
      throw UsageError(fmt::format("--model {}: {} --task {} (use {})", config.model.text(),
                                   token_model ? "is a language model and does not fit" : "does not fit",
                                   choice_name(config.task),
                                   token_model ? "--task lm" : "--model gpt or torchscript:PATH for --task lm"));
  }
  // A scripted module's BatchNorm layers are compiled in: they cannot be swapped for synchronised ones.
  if (config.sync_batch_norm && kind == ModelKind::Torchscript)
    throw UsageError(
        fmt::format("--sync-batchnorm: the BatchNorm layers of --model {} are compiled into the module "
                    "and cannot be synchronised; drop the flag (each rank then normalises by its own batch)",
                    config.model.text()));
  if ((kind == ModelKind::Gpt || kind == ModelKind::Vit) && config.hidden % config.heads != 0)
    throw UsageError(fmt::format("--heads {}: must divide --hidden {} (the {} width splits into heads)", config.heads,
                                 config.hidden, kind == ModelKind::Gpt ? "GPT" : "ViT"));
}

std::string to_ini(const TrainingConfig& config) {
  std::string out = "# mnddp configuration (mnddp train --print-config)\n";
  for (const auto& group : option_groups()) {
    out += fmt::format("\n# --- {} ---\n", group);
    for (const auto& row : option_table()) {
      if (row.group != group) continue;
      out += fmt::format("# {}\n{} = {}\n", row.help, row.name, ini_value(row.format(config)));
    }
  }
  return out;
}

std::string help_text() {
  TrainingConfig scratch;
  const TrainingConfig defaults;
  std::ostringstream out;
  out << "Usage: mpirun -np N mnddp train [options]\n"
         "       srun --mpi=pmix mnddp train --config run.ini [options]\n\n"
         "Precedence: command line > MNDDP_<OPTION> environment variables > --config file > defaults.\n"
         "Booleans take true/false (a bare --flag means true).\n\n"
      << action_options() << "\n"
      << training_options(scratch, defaults, kHelpWidth);
  return out.str();
}

std::string help_markdown() {
  const TrainingConfig defaults;
  std::string out =
      "# Configuration reference\n\n"
      "Generated by `mnddp train --help-markdown`; do not edit by hand.\n\n"
      "Every option can be given on the command line (`--name value` or `--name=value`), as an\n"
      "environment variable (`MNDDP_NAME`, upper case, `-` becomes `_`), or as a `name = value` line in\n"
      "the INI file named by `--config` (or `MNDDP_CONFIG`). The command line wins over the environment,\n"
      "which wins over the file, which wins over the default. Within one source an option is given once:\n"
      "twice on the command line, or twice in the file, is an error naming it. `mnddp train --print-config`\n"
      "prints the resolved values as an INI file that can be fed back with `--config`.\n\n"
      "In the file, `#` starts a comment and spaces around a value are dropped. A value that needs them\n"
      "is written in double quotes with backslash escapes: `train-data = \"/scratch/run\\x233/*.h5\"` is\n"
      "`/scratch/run#3/*.h5` (escapes: `\\\\` `\\\"` `\\n` `\\r` `\\t` `\\xHH`). `--print-config` quotes such\n"
      "values itself, so every value comes back exactly.\n\n"
      "## Ready configurations\n\n"
      "Each file names, in its first lines, the command that writes its data (`mnddp-data synth`; the demo's\n"
      "comes from `scripts/run.sh`) and runs in minutes on a laptop CPU with\n"
      "`mpirun -np 2 build/mnddp train --config FILE`:\n\n"
      "| file | task and model | what it shows |\n|---|---|---|\n"
      "| `configs/demo.ini` | classification, MLP | the quick start (`scripts/run.sh`) |\n"
      "| `configs/resnet18-cifar.ini` | classification, ResNet-18 (CIFAR stem) | SGD + Nesterov, cosine, label "
      "smoothing, `--keep-best accuracy` |\n"
      "| `configs/gpt-small.ini` | lm, GPT (4 x 128, context 128) | AdamW with warm-up and cosine, gradient "
      "clipping, no decay on norms and biases |\n"
      "| `configs/cnn3d-regression.ini` | regression, CosmoFlow's cnn3d on volumes | Huber loss, R² per target, "
      "`--keep-best r2` |\n"
      "| `examples/torchscript/train.ini` | classification, your own TorchScript module | "
      "`--model torchscript:PATH` (see `examples/torchscript/`) |\n";
  for (const auto& group : option_groups()) {
    out += fmt::format("\n## {}\n\n| option | environment | type | default | description |\n|---|---|---|---|---|\n",
                       group);
    for (const auto& row : option_table()) {
      if (row.group != group) continue;
      const std::string value = row.format(defaults);
      out += fmt::format("| `--{}` | `{}` | {} | {} | {} |\n", row.name, env_name_for(row.name),
                         markdown_cell(row.type_name), value.empty() ? "(empty)" : "`" + value + "`", row.help);
    }
  }
  return out;
}

}  // namespace mnddp
