// mnddp-data synth: a synthetic classification, regression or language-modelling dataset as HDF5
// shards.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "cli.hpp"
#include "mnddp/data/synth.hpp"
#include "mnddp/error.hpp"

namespace mnddp::tools {

int run_synth(std::span<const std::string> args) {
  SynthOptions synth;
  std::string shape = "1,28,28";
  std::string task = "classification";
  po::options_description options("synth options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("out", po::value(&synth.out_dir)->required(), "output directory (created if missing)")
      ("task", po::value(&task)->default_value(task),
       "classification (y: int64 class labels), regression (y: float32 targets [n] or [n, targets]) or lm "
       "(x: uint16 token ids [n, tokens], no y)")
      ("train-samples", po::value(&synth.train_samples)->default_value(synth.train_samples), "training samples")
      ("val-samples", po::value(&synth.val_samples)->default_value(synth.val_samples), "validation samples (0: none)")
      ("shards", po::value(&synth.shards)->default_value(synth.shards),
       "training files; validation gets max(1, shards/2)")
      ("shape", po::value(&shape)->default_value(shape),
       "one sample's shape, comma-separated: image-shaped (1,28,28), flat (64), a volume (4,16,16,16); lm: the "
       "tokens per sequence (default 65)")
      ("classes", po::value(&synth.num_classes)->default_value(synth.num_classes), "number of classes (classification)")
      ("targets", po::value(&synth.targets)->default_value(synth.targets),
       "regression: targets per sample (y [n] for 1, y [n, targets] above)")
      ("vocab", po::value(&synth.vocab)->default_value(synth.vocab), "lm: token ids in [0, vocab)")
      ("noise", po::value(&synth.noise)->default_value(synth.noise),
       "std of the noise around each class prototype, or added to each regression target")
      ("seed", po::value(&synth.seed)->default_value(synth.seed), "random seed (same seed, same files)")
      ("x-name", po::value(&synth.x_name)->default_value(synth.x_name), "name of the input dataset")
      ("y-name", po::value(&synth.y_name)->default_value(synth.y_name), "name of the label dataset")
      ("overwrite", po::bool_switch(&synth.overwrite), "replace an existing synthetic dataset in --out");
  // clang-format on
  po::variables_map values;
  if (!parse_arguments(args, options, {},
                       "usage: mnddp-data synth --out DIR [options]\n"
                       "Writes train_NNN.h5 and val_NNN.h5. classification: Gaussian class prototypes plus noise;\n"
                       "regression: y_j = <w_j, x> / sqrt(features) + noise for standard normal x;\n"
                       "lm: each token followed by one of 2 successors fixed per token (best loss log 2).",
                       values))
    return kExitOk;
  if (task == "classification")
    synth.task = SynthTask::Classification;
  else if (task == "regression")
    synth.task = SynthTask::Regression;
  else if (task == "lm")
    synth.task = SynthTask::Lm;
  else
    throw UsageError(fmt::format("--task: unknown task '{}' (use classification, regression or lm)", task));
  if (synth.task == SynthTask::Lm && values["shape"].defaulted()) shape = "65";
  synth.shape = parse_shape(shape, "--shape");

  const auto files = write_synthetic_dataset(synth);
  for (const auto& file : files) std::cout << file << "\n";
  const std::string targets = synth.task == SynthTask::Classification ? fmt::format("{} classes", synth.num_classes)
                              : synth.task == SynthTask::Regression
                                  ? fmt::format("{} regression target{}", synth.targets, synth.targets > 1 ? "s" : "")
                                  : fmt::format("token ids in [0, {})", synth.vocab);
  std::cout << fmt::format("wrote {} training and {} validation samples of shape [{}] ({}) in {} files\n",
                           synth.train_samples, synth.val_samples, fmt::join(synth.shape, ", "), targets, files.size());
  return kExitOk;
}

}  // namespace mnddp::tools
