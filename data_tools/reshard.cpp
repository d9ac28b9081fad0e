// mnddp-data reshard: reads any set of shards and writes N balanced ones (sizes differ by at most
// one sample), optionally in a seeded shuffled order and gzip-compressed. x and y keep their dtypes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <set>

#include "cli.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/error.hpp"

namespace mnddp::tools {
namespace {
namespace fs = std::filesystem;

constexpr std::size_t kBlockBytes = std::size_t{16} << 20;  // bytes of samples read per step

// The sampler's epoch-0 permutation for one rank: portable, so the same --seed writes the same
// files on every platform.
std::vector<std::int64_t> output_order(std::int64_t count, bool shuffle, std::uint64_t seed) {
  SamplerOptions order;
  order.num_samples = count;
  order.seed = seed;
  order.shuffle = shuffle;
  return DistributedSampler(order).global_order(0);
}

void refuse_inputs_as_outputs(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  std::set<fs::path> in;
  for (const auto& file : inputs) in.insert(fs::weakly_canonical(file));
  for (const auto& file : outputs)
    if (in.count(fs::weakly_canonical(file)))
      throw UsageError(fmt::format("--out: output '{}' is also an input; write to another directory", file));
}

}  // namespace

int run_reshard(std::span<const std::string> args) {
  std::vector<std::string> specs;
  std::string out_dir;
  std::string prefix = "shard";
  std::string x_name = "x";
  std::string y_name = "y";
  int shards = 0;
  bool shuffle = false;
  std::uint64_t seed = 0;
  std::string compression = "none";
  int level = 4;
  bool overwrite = false;
  po::options_description options("reshard options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("paths", po::value(&specs)->multitoken(),
       "input files, directories, globs or .txt/.list files (also as plain arguments)")
      ("out", po::value(&out_dir)->required(), "output directory (created if missing)")
      ("shards", po::value(&shards)->required(), "number of output shards")
      ("prefix", po::value(&prefix)->default_value(prefix), "output names: <prefix>_NNN.h5")
      ("shuffle", po::bool_switch(&shuffle), "write the samples in a seeded random order (default: input order)")
      ("seed", po::value(&seed)->default_value(seed), "seed of --shuffle")
      ("compression", po::value(&compression)->default_value(compression), "none or gzip (with byte shuffling)")
      ("compression-level", po::value(&level)->default_value(level), "gzip level, 1-9")
      ("x-name", po::value(&x_name)->default_value(x_name), "name of the input dataset (kept in the output)")
      ("y-name", po::value(&y_name)->default_value(y_name), "name of the label dataset (kept in the output)")
      ("overwrite", po::bool_switch(&overwrite),
       "replace existing <prefix>_NNN.h5 files in --out (and remove ones beyond --shards)");
  // clang-format on
  po::positional_options_description positional;
  positional.add("paths", -1);
  po::variables_map values;
  if (!parse_arguments(args, options, positional,
                       "usage: mnddp-data reshard PATHS... --out DIR --shards N [options]\n"
                       "Rewrites a dataset as N chunked shards of near-equal size; dtypes are kept.",
                       values))
    return kExitOk;
  const int gzip = gzip_level_of(compression, level);

  const std::vector<std::string> inputs = expand_all(specs, "reshard");
  const ShardIndex index = scan_shards(inputs, x_name, y_name, LabelKind::Value);
  const std::int64_t total = index.num_samples();
  if (shards < 1) throw UsageError(fmt::format("--shards must be at least 1, got {}", shards));
  if (shards > total)
    throw UsageError(fmt::format("--shards {} exceeds the {} samples: every shard needs at least one", shards, total));
  const std::vector<std::string> outputs = plan_outputs(out_dir, prefix, shards, overwrite);
  const std::vector<std::string> stale = stale_outputs(out_dir, prefix, outputs);
  refuse_inputs_as_outputs(inputs, outputs);
  refuse_inputs_as_outputs(inputs, stale);

  ShardLayout layout;
  layout.x_name = x_name;
  layout.y_name = y_name;
  layout.x_type = index.sample_type;
  layout.sample_shape = index.sample_shape;
  layout.y_type = index.label_type;
  layout.gzip_level = gzip;
  const std::size_t x_row = static_cast<std::size_t>(index.sample_numel()) * sample_type_size(index.sample_type);
  const std::size_t y_row = sample_type_size(index.label_type);
  const auto block = static_cast<std::int64_t>(std::max<std::size_t>(1, kBlockBytes / x_row));
  H5ReaderOptions reading;
  reading.batch_size = block;
  H5Reader reader(index, reading);

  const std::vector<std::int64_t> order = output_order(total, shuffle, seed);
  std::vector<unsigned char> x;
  std::vector<unsigned char> y;
  for (int s = 0; s < shards; ++s) {
    const std::int64_t begin = total * s / shards;
    const std::int64_t end = total * (s + 1) / shards;
    ShardWriter writer(outputs[static_cast<std::size_t>(s)], end - begin, layout);
    for (std::int64_t first = begin; first < end; first += block) {
      const std::int64_t rows = std::min(block, end - first);
      x.resize(static_cast<std::size_t>(rows) * x_row);
      y.resize(static_cast<std::size_t>(rows) * y_row);
      reader.read_stored(std::span(order).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows)),
                         x.data(), y.data());
      writer.write(first - begin, rows, x.data(), y.data());
    }
    writer.commit();
    std::cout << fmt::format("{}: {} samples\n", writer.path(), end - begin);
  }
  for (const auto& file : stale) fs::remove(file);
  std::cout << fmt::format("wrote {} samples of {} [{}] into {} shards{}{}\n", total,
                           sample_type_name(index.sample_type), fmt::join(index.sample_shape, ", "), shards,
                           shuffle ? fmt::format(", shuffled with seed {}", seed) : "",
                           gzip > 0 ? fmt::format(", gzip level {}", gzip) : "");
  return kExitOk;
}

}  // namespace mnddp::tools
