// mnddp-data stats: per-feature mean and std over all training shards, written to the JSON file
// the trainer's input normalisation reads (load_feature_stats).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli.hpp"
#include "mnddp/data/feature_stats.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/error.hpp"

namespace mnddp::tools {

int run_stats(std::span<const std::string> args) {
  std::vector<std::string> specs;
  std::string out;
  std::string x_name = "x";
  std::string y_name = "y";
  std::int64_t block = 4096;
  bool overwrite = false;
  po::options_description options("stats options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("paths", po::value(&specs)->multitoken(),
       "training files, directories, globs or .txt/.list files (also as plain arguments)")
      ("out", po::value(&out)->required(), "stats file to write (JSON)")
      ("x-name", po::value(&x_name)->default_value(x_name), "name of the input dataset")
      ("y-name", po::value(&y_name)->default_value(y_name), "name of the label dataset")
      ("block-samples", po::value(&block)->default_value(block), "samples read at a time")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing --out file");
  // clang-format on
  po::positional_options_description positional;
  positional.add("paths", -1);
  po::variables_map values;
  if (!parse_arguments(args, options, positional,
                       "usage: mnddp-data stats PATHS... --out FILE [options]\n"
                       "Mean and (population) std of every input feature over all samples, computed in double\n"
                       "precision; the stored values are used as they are (uint8 stays 0-255). NaN or infinity\n"
                       "in an input is an error naming the file and sample.",
                       values))
    return kExitOk;
  if (block < 1) throw UsageError(fmt::format("--block-samples must be at least 1, got {}", block));
  require_new_outputs({out}, overwrite);

  const ShardIndex index = scan_shards(expand_all(specs, "stats"), x_name, y_name, LabelKind::Value);
  H5ReaderOptions reading;
  reading.nonfinite = NonfinitePolicy::Error;  // one NaN would make its feature's statistics NaN
  reading.batch_size = block;
  H5Reader reader(index, reading);
  const FeatureStats stats = compute_feature_stats(reader, block);
  save_feature_stats(stats, out, overwrite);

  const auto [mean_low, mean_high] = std::minmax_element(stats.mean.begin(), stats.mean.end());
  const auto [std_low, std_high] = std::minmax_element(stats.stddev.begin(), stats.stddev.end());
  std::cout << fmt::format(
      "wrote {}: {} features over {} samples in {} files; mean in [{:.6g}, {:.6g}], std in "
      "[{:.6g}, {:.6g}]\n",
      out, stats.num_features(), stats.count, stats.files.size(), *mean_low, *mean_high, *std_low, *std_high);
  return kExitOk;
}

}  // namespace mnddp::tools
