// mnddp-data convert: .npy, .csv, MNIST IDX or CIFAR-10 binary input -> N balanced HDF5 shards in
// input order. x keeps its dtype (uint8 stays uint8; CSV becomes float32), y becomes int64; a flat
// token file becomes token sequences x [n, length] without y.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "mnddp/data/shard_writer.hpp"
#include "mnddp/error.hpp"
#include "sources.hpp"

namespace mnddp::tools {
namespace {

constexpr std::size_t kBlockBytes = std::size_t{16} << 20;  // bytes of samples copied per step

struct Inputs {
  std::string npy_x;
  std::string npy_y;
  std::string csv;
  std::string label_column = "-1";
  std::string header = "auto";
  std::string idx_images;
  std::string idx_labels;
  std::vector<std::string> cifar10;
  std::string tokens;
  std::string token_type = "uint16";
  std::int64_t sequence_length = 1025;
};

// Exactly one input format, complete.
std::unique_ptr<SampleSource> open_source(const Inputs& in) {
  const int formats = static_cast<int>(!in.npy_x.empty() || !in.npy_y.empty()) + static_cast<int>(!in.csv.empty()) +
                      static_cast<int>(!in.idx_images.empty() || !in.idx_labels.empty()) +
                      static_cast<int>(!in.cifar10.empty()) + static_cast<int>(!in.tokens.empty());
  if (formats != 1)
    throw UsageError(
        fmt::format("convert: give exactly one input: --x/--y (.npy), --csv, --images/--labels (IDX), "
                    "--cifar10 or --tokens ({} given)",
                    formats));
  if (!in.tokens.empty()) {
    if (in.token_type != "uint16" && in.token_type != "uint32")
      throw UsageError(fmt::format("--token-type: must be uint16 or uint32 (got '{}')", in.token_type));
    return open_token_source(in.tokens, in.token_type == "uint16" ? SampleType::U16 : SampleType::U32,
                             in.sequence_length);
  }
  if (!in.npy_x.empty() || !in.npy_y.empty()) {
    if (in.npy_x.empty() || in.npy_y.empty())
      throw UsageError(fmt::format("--x '{}' and --y '{}': .npy input needs both", in.npy_x, in.npy_y));
    return open_npy_source(in.npy_x, in.npy_y);
  }
  if (!in.csv.empty()) return open_csv_source(in.csv, in.label_column, in.header);
  if (!in.idx_images.empty() || !in.idx_labels.empty()) {
    if (in.idx_images.empty() || in.idx_labels.empty())
      throw UsageError(
          fmt::format("--images '{}' and --labels '{}': IDX input needs both", in.idx_images, in.idx_labels));
    return open_idx_source(in.idx_images, in.idx_labels);
  }
  return open_cifar10_source(in.cifar10);
}

}  // namespace

int run_convert(std::span<const std::string> args) {
  Inputs in;
  std::string out_dir;
  std::string prefix = "train";
  int shards = 1;
  ShardLayout layout;
  std::string compression = "none";
  int level = 4;
  bool overwrite = false;
  po::options_description options("convert options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("x", po::value(&in.npy_x), ".npy inputs [samples, ...] (uint8, int8/16/32/64, float16/32/64; any byte order)")
      ("y", po::value(&in.npy_y), ".npy integer labels [samples]")
      ("csv", po::value(&in.csv), "numeric CSV, one sample per line (inputs become float32)")
      ("label-column", po::value(&in.label_column)->default_value(in.label_column),
       "CSV label column: index (negative counts from the end) or header name")
      ("header", po::value(&in.header)->default_value(in.header),
       "CSV header line: auto (if the first line is not all numbers), yes or no")
      ("images", po::value(&in.idx_images), "MNIST-style IDX images file (uncompressed)")
      ("labels", po::value(&in.idx_labels), "MNIST-style IDX labels file (uncompressed)")
      ("cifar10", po::value(&in.cifar10)->multitoken(), "CIFAR-10 binary batch files (data_batch_*.bin), in order")
      ("tokens", po::value(&in.tokens), "a flat token file (nanoGPT's train.bin), for --task lm: no y")
      ("token-type", po::value(&in.token_type)->default_value(in.token_type), "--tokens element type: uint16 or uint32")
      ("sequence-length", po::value(&in.sequence_length)->default_value(in.sequence_length),
       "--tokens: tokens per sequence (x [n, length]; train with --context up to length - 1)")
      ("out", po::value(&out_dir)->required(), "output directory (created if missing)")
      ("shards", po::value(&shards)->default_value(shards), "number of output shards (balanced, input order)")
      ("prefix", po::value(&prefix)->default_value(prefix), "output names: <prefix>_NNN.h5")
      ("x-name", po::value(&layout.x_name)->default_value(layout.x_name), "name of the input dataset")
      ("y-name", po::value(&layout.y_name)->default_value(layout.y_name), "name of the label dataset")
      ("compression", po::value(&compression)->default_value(compression), "none or gzip (with byte shuffling)")
      ("compression-level", po::value(&level)->default_value(level), "gzip level, 1-9")
      ("overwrite", po::bool_switch(&overwrite), "replace existing <prefix>_NNN.h5 files in --out");
  // clang-format on
  po::variables_map values;
  if (!parse_arguments(args, options, {},
                       "usage: mnddp-data convert (--x X.npy --y Y.npy | --csv F | --images I --labels L |\n"
                       "                           --cifar10 FILES... | --tokens train.bin) --out DIR [options]\n"
                       "Writes <prefix>_NNN.h5 shards: x keeps its dtype, y is int64.",
                       values))
    return kExitOk;
  layout.gzip_level = gzip_level_of(compression, level);
  if (layout.x_name.empty() || layout.y_name.empty() || layout.x_name == layout.y_name)
    throw UsageError(
        fmt::format("--x-name '{}' and --y-name '{}' must be distinct and non-empty", layout.x_name, layout.y_name));

  const std::unique_ptr<SampleSource> source = open_source(in);
  if (source->num_samples < 1) throw UsageError(fmt::format("{} holds no samples", source->description));
  if (shards > source->num_samples)
    throw UsageError(
        fmt::format("--shards {} exceeds the {} samples: every shard needs at least one", shards, source->num_samples));
  const std::vector<std::string> outputs = plan_outputs(out_dir, prefix, shards, overwrite);
  const std::vector<std::string> stale = stale_outputs(out_dir, prefix, outputs);
  layout.x_type = source->x_type;
  layout.sample_shape = source->sample_shape;
  layout.y_type = SampleType::I64;
  const bool labelled = !source->labels.empty();
  if (!labelled) layout.y_name.clear();

  std::size_t row_bytes = sample_type_size(source->x_type);
  for (const auto d : source->sample_shape) row_bytes *= static_cast<std::size_t>(d);
  const auto block = static_cast<std::int64_t>(std::max<std::size_t>(1, kBlockBytes / row_bytes));
  std::vector<unsigned char> x;
  const std::int64_t total = source->num_samples;
  for (int s = 0; s < shards; ++s) {
    const std::int64_t begin = total * s / shards;
    const std::int64_t end = total * (s + 1) / shards;
    ShardWriter writer(outputs[static_cast<std::size_t>(s)], end - begin, layout);
    for (std::int64_t first = begin; first < end; first += block) {
      const std::int64_t rows = std::min(block, end - first);
      x.resize(static_cast<std::size_t>(rows) * row_bytes);
      source->read(first, rows, x.data());
      writer.write(first - begin, rows, x.data(), labelled ? source->labels.data() + first : nullptr);
    }
    writer.commit();
    std::cout << fmt::format("{}: {} samples\n", writer.path(), end - begin);
  }
  for (const auto& file : stale) std::filesystem::remove(file);
  std::string labels = "no labels";
  if (labelled) {
    const auto [low, high] = std::minmax_element(source->labels.begin(), source->labels.end());
    labels = fmt::format("labels in [{}, {}]", *low, *high);
  }
  std::cout << fmt::format("converted {}: {} samples of {} [{}], {}, into {} shard{}\n", source->description, total,
                           sample_type_name(source->x_type), fmt::join(source->sample_shape, ", "), labels, shards,
                           shards == 1 ? "" : "s");
  return kExitOk;
}

}  // namespace mnddp::tools
