// Synthetic data: classification (Gaussian class prototypes plus per-sample noise), regression
// (k noisy linear functions of Gaussian inputs) or token sequences (a sparse Markov chain), written
// as HDF5 shards through ShardWriter.
#include "mnddp/data/synth.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <regex>

#include "mnddp/data/shard_writer.hpp"
#include "mnddp/error.hpp"
#include "portable_random.hpp"

namespace mnddp {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlockBytes = std::size_t{8} << 20;  // samples drawn per write: bounds memory
// Generator streams: the prototypes, then each split, so the training samples do not change when
// only --val-samples does (and vice versa).
constexpr std::uint64_t kPrototypeStream = 0;
constexpr std::uint64_t kTrainStream = 1;
constexpr std::uint64_t kValStream = 2;

void validate(const SynthOptions& o) {
  if (o.out_dir.empty()) throw UsageError("--out: an output directory is required");
  if (o.train_samples < 1) throw UsageError(fmt::format("--train-samples must be at least 1, got {}", o.train_samples));
  if (o.val_samples < 0) throw UsageError(fmt::format("--val-samples must be at least 0, got {}", o.val_samples));
  if (o.shards < 1) throw UsageError(fmt::format("--shards must be at least 1, got {}", o.shards));
  if (o.shards > o.train_samples)
    throw UsageError(fmt::format("--shards {} exceeds --train-samples {}: every shard needs at least one sample",
                                 o.shards, o.train_samples));
  if (o.shape.empty()) throw UsageError("--shape: a sample needs at least one dimension");
  for (auto d : o.shape)
    if (d < 1) throw UsageError(fmt::format("--shape: every dimension must be at least 1, got {}", d));
  if (o.task == SynthTask::Classification && o.num_classes < 2)
    throw UsageError(fmt::format("--classes must be at least 2, got {}", o.num_classes));
  if (o.task == SynthTask::Regression && o.targets < 1)
    throw UsageError(fmt::format("--targets must be at least 1, got {}", o.targets));
  if (o.task == SynthTask::Lm) {
    if (o.vocab < kSynthSuccessors + 1 || o.vocab > (1 << 24))
      throw UsageError(fmt::format("--vocab must be in [{}, {}], got {}", kSynthSuccessors + 1, 1 << 24, o.vocab));
    if (o.shape.size() != 1 || o.shape[0] < 2)
      throw UsageError(fmt::format("--shape: token sequences need one dimension of at least 2 tokens, got [{}]",
                                   fmt::join(o.shape, ", ")));
  }
  if (!(o.noise >= 0.0)) throw UsageError(fmt::format("--noise must be at least 0, got {}", o.noise));
  if (o.x_name.empty() || o.y_name.empty() || o.x_name == o.y_name)
    throw UsageError(fmt::format("--x-name '{}' and --y-name '{}' must be distinct and non-empty", o.x_name, o.y_name));
}

// The generator's fixed part, drawn once. Classification: one prototype per class [classes, numel].
// Regression: one weight vector per target [targets, numel]. Lm: each token's successors
// [vocab, kSynthSuccessors], stored as floats.
std::size_t prototype_count(const SynthOptions& o, std::size_t numel) {
  switch (o.task) {
    case SynthTask::Classification:
      return static_cast<std::size_t>(o.num_classes) * numel;
    case SynthTask::Regression:
      return static_cast<std::size_t>(o.targets) * numel;
    case SynthTask::Lm:
      return static_cast<std::size_t>(o.vocab) * kSynthSuccessors;
  }
  return 0;
}

SampleType token_type(const SynthOptions& o) { return o.vocab <= 65536 ? SampleType::U16 : SampleType::U32; }

std::string shard_name(const std::string& split, int number, int count) {
  const int width = std::max<int>(3, static_cast<int>(std::to_string(count - 1).size()));
  return fmt::format("{}_{:0{}}.h5", split, number, width);
}

// The directory must hold exactly one synthetic dataset afterwards: files of an earlier run with
// more shards would otherwise be picked up by a directory spec.
void clear_earlier_output(const fs::path& dir, bool overwrite) {
  static const std::regex kOurFile(R"((train|val)_[0-9]+\.h5)");
  std::vector<fs::path> earlier;
  for (const auto& entry : fs::directory_iterator(dir))
    if (std::regex_match(entry.path().filename().string(), kOurFile)) earlier.push_back(entry.path());
  if (earlier.empty()) return;
  std::sort(earlier.begin(), earlier.end());
  if (!overwrite)
    throw UsageError(fmt::format("'{}' already exists; pass --overwrite to replace the dataset in '{}'",
                                 earlier.front().string(), dir.string()));
  for (const auto& path : earlier) fs::remove(path);
}

// Draws one block of samples in sample order from `rng` (so a different split into files gives
// the same samples). Classification: a uniform label and its prototype plus noise. Regression:
// standard normal inputs and y_j = <w_j, x> / sqrt(numel) + noise. Lm: a uniform first token, then
// each token one of its predecessor's successors (x holds the ids).
void draw_block(const SynthOptions& o, const std::vector<float>& prototypes, std::size_t numel, hsize_t rows,
                std::mt19937_64& rng, detail::NormalSource& normal, std::vector<float>& x,
                std::vector<std::int64_t>& labels, std::vector<float>& targets) {
  x.resize(rows * numel);
  for (hsize_t r = 0; r < rows; ++r) {
    float* sample = x.data() + r * numel;
    if (o.task == SynthTask::Classification) {
      const auto label =
          static_cast<std::int64_t>(detail::bounded_random(rng, static_cast<std::uint64_t>(o.num_classes)));
      labels.push_back(label);
      const float* prototype = prototypes.data() + static_cast<std::size_t>(label) * numel;
      for (std::size_t i = 0; i < numel; ++i) sample[i] = prototype[i] + static_cast<float>(o.noise * normal.next(rng));
    } else if (o.task == SynthTask::Regression) {
      for (std::size_t i = 0; i < numel; ++i) sample[i] = static_cast<float>(normal.next(rng));
      for (int j = 0; j < o.targets; ++j) {
        const float* weights = prototypes.data() + static_cast<std::size_t>(j) * numel;
        double dot = 0.0;
        for (std::size_t i = 0; i < numel; ++i) dot += static_cast<double>(weights[i]) * sample[i];
        targets.push_back(static_cast<float>(dot / std::sqrt(static_cast<double>(numel)) + o.noise * normal.next(rng)));
      }
    } else {
      auto token = detail::bounded_random(rng, static_cast<std::uint64_t>(o.vocab));
      for (std::size_t i = 0; i < numel; ++i) {
        sample[i] = static_cast<float>(token);
        const auto pick = detail::bounded_random(rng, kSynthSuccessors);
        token = static_cast<std::uint64_t>(prototypes[token * kSynthSuccessors + pick]);
      }
    }
  }
}

// Token ids (held as exact floats below 2^24) in the shard's integer type.
template <typename T>
std::vector<T> as_tokens(const std::vector<float>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// Writes one shard of `count` samples, drawing from `rng` in sample order.
void write_shard(const std::string& path, const SynthOptions& o, const std::vector<float>& prototypes,
                 std::size_t numel, std::int64_t count, std::mt19937_64& rng, detail::NormalSource& normal) {
  ShardLayout layout;
  layout.x_name = o.x_name;
  layout.y_name = o.task == SynthTask::Lm ? std::string() : o.y_name;
  layout.x_type = o.task == SynthTask::Lm ? token_type(o) : SampleType::F32;
  layout.sample_shape = o.shape;
  layout.y_type = o.task == SynthTask::Classification ? SampleType::I64 : SampleType::F32;
  if (o.task == SynthTask::Regression && o.targets > 1) layout.label_shape = {o.targets};
  ShardWriter writer(path, count, layout);

  const auto block_rows = static_cast<hsize_t>(
      std::clamp<std::int64_t>(static_cast<std::int64_t>(kBlockBytes / (numel * sizeof(float))), 1, count));
  std::vector<float> x;
  std::vector<std::int64_t> labels;
  std::vector<float> targets;
  for (hsize_t first = 0; first < static_cast<hsize_t>(count); first += block_rows) {
    const hsize_t rows = std::min<hsize_t>(block_rows, static_cast<hsize_t>(count) - first);
    labels.clear();
    targets.clear();
    draw_block(o, prototypes, numel, rows, rng, normal, x, labels, targets);
    const auto at = static_cast<std::int64_t>(first);
    const auto n = static_cast<std::int64_t>(rows);
    if (o.task == SynthTask::Lm && layout.x_type == SampleType::U16)
      writer.write(at, n, as_tokens<std::uint16_t>(x).data(), nullptr);
    else if (o.task == SynthTask::Lm)
      writer.write(at, n, as_tokens<std::uint32_t>(x).data(), nullptr);
    else
      writer.write(at, n, x.data(),
                   o.task == SynthTask::Classification ? static_cast<const void*>(labels.data()) : targets.data());
  }
  if (o.task == SynthTask::Classification) writer.write_attribute("num_classes", std::int64_t{o.num_classes});
  if (o.task == SynthTask::Lm) writer.write_attribute("vocab_size", std::int64_t{o.vocab});
  writer.write_attribute("mnddp_synth_seed", static_cast<std::int64_t>(o.seed));
  writer.write_attribute("mnddp_synth_noise", o.noise);
  writer.commit();
}

// Writes `total` samples as `shards` files named <split>_NNN.h5 of near-equal size.
void write_split(const std::string& split, std::int64_t total, int shards, std::uint64_t stream, const SynthOptions& o,
                 const std::vector<float>& prototypes, std::size_t numel, std::vector<std::string>& written) {
  std::mt19937_64 rng(detail::mix_seed(o.seed, stream));
  detail::NormalSource normal;
  for (int s = 0; s < shards; ++s) {
    const std::int64_t begin = total * s / shards;
    const std::int64_t end = total * (s + 1) / shards;
    const std::string path = (fs::path(o.out_dir) / shard_name(split, s, shards)).string();
    write_shard(path, o, prototypes, numel, end - begin, rng, normal);
    written.push_back(path);
  }
}

}  // namespace

std::vector<std::string> write_synthetic_dataset(const SynthOptions& options) {
  validate(options);
  std::error_code error;
  fs::create_directories(options.out_dir, error);
  if (error || !fs::is_directory(options.out_dir))
    throw UsageError(fmt::format("--out: cannot create directory '{}': {}", options.out_dir, error.message()));
  clear_earlier_output(options.out_dir, options.overwrite);

  std::size_t numel = 1;
  for (auto d : options.shape) numel *= static_cast<std::size_t>(d);
  std::vector<float> prototypes(prototype_count(options, numel));
  std::mt19937_64 rng(detail::mix_seed(options.seed, kPrototypeStream));
  detail::NormalSource normal;
  for (auto& value : prototypes)
    value = options.task == SynthTask::Lm
                ? static_cast<float>(detail::bounded_random(rng, static_cast<std::uint64_t>(options.vocab)))
                : static_cast<float>(normal.next(rng));

  std::vector<std::string> written;
  write_split("train", options.train_samples, options.shards, kTrainStream, options, prototypes, numel, written);
  if (options.val_samples > 0) {
    const auto val_shards =
        static_cast<int>(std::min<std::int64_t>(std::max(1, options.shards / 2), options.val_samples));
    write_split("val", options.val_samples, val_shards, kValStream, options, prototypes, numel, written);
  }
  return written;
}

std::vector<std::string> write_synthetic_classification(const SynthOptions& options) {
  SynthOptions classification = options;
  classification.task = SynthTask::Classification;
  return write_synthetic_dataset(classification);
}

}  // namespace mnddp
