// Synthetic datasets for demos, tests and benchmarks: a learnable classification problem
// (Gaussian class prototypes plus noise) or a linear regression one, written as HDF5 shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

// The trainer does classification only; regression data is for the tools and other trainers.
enum class SynthTask { Classification, Regression };

struct SynthOptions {
  SynthTask task = SynthTask::Classification;
  std::string out_dir;
  std::int64_t train_samples = 8192;
  std::int64_t val_samples = 2048;
  int shards = 4;                                 // train shards (val gets max(1, shards/2))
  std::vector<std::int64_t> shape = {1, 28, 28};  // one sample's shape
  int num_classes = 10;                           // classification only
  double noise = 1.0;  // std of the noise around the class prototype, or added to the regression target
  std::uint64_t seed = 1234;
  std::string x_name = "x";
  std::string y_name = "y";
  bool overwrite = false;
};

// Writes <out_dir>/train_NNN.h5 and <out_dir>/val_NNN.h5 (x: float32 [n, shape...]; y: int64 [n]
// class labels, or float32 [n] regression targets). Refuses to overwrite existing files unless
// options.overwrite. Returns the files written.
std::vector<std::string> write_synthetic_dataset(const SynthOptions& options);
// The same with options.task forced to classification.
std::vector<std::string> write_synthetic_classification(const SynthOptions& options);

}  // namespace mnddp
