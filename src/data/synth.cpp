// Synthetic classification data: Gaussian class prototypes plus per-sample noise, written as
// HDF5 shards (x float32 [n, shape...], y int64 [n]) that the trainer and the tests read.
#include "mnddp/data/synth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <regex>

#include "mnddp/check.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "portable_random.hpp"

namespace mnddp {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;  // ~1 MiB of samples per chunk
constexpr std::size_t kChunksPerWrite = 8;                 // bounds memory for large shards
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
  if (o.num_classes < 2) throw UsageError(fmt::format("--classes must be at least 2, got {}", o.num_classes));
  if (!(o.noise >= 0.0)) throw UsageError(fmt::format("--noise must be at least 0, got {}", o.noise));
  if (o.x_name.empty() || o.y_name.empty() || o.x_name == o.y_name)
    throw UsageError(fmt::format("--x-name '{}' and --y-name '{}' must be distinct and non-empty", o.x_name, o.y_name));
}

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

void write_scalar_attribute(hid_t file, const char* name, hid_t type, const void* value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attribute(H5Acreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(attribute.get());
  MNDDP_H5_CHECK(H5Awrite(attribute.get(), type, value));
}

// Writes one shard of `count` samples, drawing labels and noise from `rng` in sample order.
void write_shard(const std::string& path, const SynthOptions& o, const std::vector<float>& prototypes,
                 std::int64_t count, std::mt19937_64& rng, detail::NormalSource& normal) {
  const auto numel = static_cast<std::size_t>(prototypes.size() / static_cast<std::size_t>(o.num_classes));
  std::lock_guard lock(hdf5_mutex());
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  if (!file) throw UsageError(fmt::format("cannot create '{}': {}", path, h5_take_error()));

  std::vector<hsize_t> dims{static_cast<hsize_t>(count)};
  dims.insert(dims.end(), o.shape.begin(), o.shape.end());
  const auto chunk_rows = static_cast<hsize_t>(
      std::clamp<std::int64_t>(static_cast<std::int64_t>(kChunkBytes / (numel * sizeof(float))), 1, count));
  std::vector<hsize_t> chunk = dims;
  chunk[0] = chunk_rows;
  H5Handle links(H5Pcreate(H5P_LINK_CREATE));
  MNDDP_H5_CHECK(H5Pset_create_intermediate_group(links.get(), 1));  // allows names like "train/images"
  H5Handle x_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle x_props(H5Pcreate(H5P_DATASET_CREATE));
  MNDDP_H5_CHECK(H5Pset_chunk(x_props.get(), static_cast<int>(chunk.size()), chunk.data()));
  H5Handle x(
      H5Dcreate2(file.get(), o.x_name.c_str(), H5T_IEEE_F32LE, x_space.get(), links.get(), x_props.get(), H5P_DEFAULT));
  MNDDP_H5_CHECK(x.get());
  H5Handle y_space(H5Screate_simple(1, dims.data(), nullptr));
  H5Handle y(
      H5Dcreate2(file.get(), o.y_name.c_str(), H5T_STD_I64LE, y_space.get(), links.get(), H5P_DEFAULT, H5P_DEFAULT));
  MNDDP_H5_CHECK(y.get());

  const hsize_t block_rows = chunk_rows * kChunksPerWrite;
  std::vector<float> x_block;
  std::vector<std::int64_t> y_block;
  for (hsize_t first = 0; first < static_cast<hsize_t>(count); first += block_rows) {
    const hsize_t rows = std::min<hsize_t>(block_rows, static_cast<hsize_t>(count) - first);
    x_block.resize(rows * numel);
    y_block.resize(rows);
    for (hsize_t r = 0; r < rows; ++r) {
      const auto label =
          static_cast<std::int64_t>(detail::bounded_random(rng, static_cast<std::uint64_t>(o.num_classes)));
      y_block[r] = label;
      const float* prototype = prototypes.data() + static_cast<std::size_t>(label) * numel;
      float* sample = x_block.data() + r * numel;
      for (std::size_t i = 0; i < numel; ++i) sample[i] = prototype[i] + static_cast<float>(o.noise * normal.next(rng));
    }
    std::vector<hsize_t> start(dims.size(), 0);
    std::vector<hsize_t> extent = dims;
    start[0] = first;
    extent[0] = rows;
    H5Handle x_memory(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr));
    MNDDP_H5_CHECK(H5Sselect_hyperslab(x_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr));
    MNDDP_H5_CHECK(H5Dwrite(x.get(), H5T_NATIVE_FLOAT, x_memory.get(), x_space.get(), H5P_DEFAULT, x_block.data()));
    H5Handle y_memory(H5Screate_simple(1, &rows, nullptr));
    MNDDP_H5_CHECK(H5Sselect_hyperslab(y_space.get(), H5S_SELECT_SET, &first, nullptr, &rows, nullptr));
    MNDDP_H5_CHECK(H5Dwrite(y.get(), H5T_NATIVE_INT64, y_memory.get(), y_space.get(), H5P_DEFAULT, y_block.data()));
  }

  const int num_classes = o.num_classes;
  const std::uint64_t seed = o.seed;
  const double noise = o.noise;
  write_scalar_attribute(file.get(), "num_classes", H5T_NATIVE_INT, &num_classes);
  write_scalar_attribute(file.get(), "mnddp_synth_seed", H5T_NATIVE_UINT64, &seed);
  write_scalar_attribute(file.get(), "mnddp_synth_noise", H5T_NATIVE_DOUBLE, &noise);
  MNDDP_H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_LOCAL));
}

// Writes `total` samples as `shards` files named <split>_NNN.h5 of near-equal size.
void write_split(const std::string& split, std::int64_t total, int shards, std::uint64_t stream, const SynthOptions& o,
                 const std::vector<float>& prototypes, std::vector<std::string>& written) {
  std::mt19937_64 rng(detail::mix_seed(o.seed, stream));
  detail::NormalSource normal;
  for (int s = 0; s < shards; ++s) {
    const std::int64_t begin = total * s / shards;
    const std::int64_t end = total * (s + 1) / shards;
    const std::string path = (fs::path(o.out_dir) / shard_name(split, s, shards)).string();
    write_shard(path, o, prototypes, end - begin, rng, normal);
    written.push_back(path);
  }
}

}  // namespace

std::vector<std::string> write_synthetic_classification(const SynthOptions& options) {
  validate(options);
  std::error_code error;
  fs::create_directories(options.out_dir, error);
  if (error || !fs::is_directory(options.out_dir))
    throw UsageError(fmt::format("--out: cannot create directory '{}': {}", options.out_dir, error.message()));
  clear_earlier_output(options.out_dir, options.overwrite);

  std::size_t numel = 1;
  for (auto d : options.shape) numel *= static_cast<std::size_t>(d);
  std::vector<float> prototypes(numel * static_cast<std::size_t>(options.num_classes));
  std::mt19937_64 rng(detail::mix_seed(options.seed, kPrototypeStream));
  detail::NormalSource normal;
  for (auto& value : prototypes) value = static_cast<float>(normal.next(rng));

  std::vector<std::string> written;
  write_split("train", options.train_samples, options.shards, kTrainStream, options, prototypes, written);
  if (options.val_samples > 0) {
    const auto val_shards =
        static_cast<int>(std::min<std::int64_t>(std::max(1, options.shards / 2), options.val_samples));
    write_split("val", options.val_samples, val_shards, kValStream, options, prototypes, written);
  }
  return written;
}

}  // namespace mnddp
