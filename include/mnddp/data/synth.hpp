// Synthetic datasets for demos, tests and benchmarks: a learnable classification problem
// (Gaussian class prototypes plus noise), written as HDF5 shards the trainer reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

struct SynthOptions {
  std::string out_dir;
  std::int64_t train_samples = 8192;
  std::int64_t val_samples = 2048;
  int shards = 4;                                 // train shards (val gets max(1, shards/2))
  std::vector<std::int64_t> shape = {1, 28, 28};  // one sample's shape
  int num_classes = 10;
  double noise = 1.0;  // std of the per-sample noise around the prototype
  std::uint64_t seed = 1234;
  std::string x_name = "x";
  std::string y_name = "y";
  bool overwrite = false;
};

// Writes <out_dir>/train_NNN.h5 and <out_dir>/val_NNN.h5 (x: float32 [n, shape...], y: int64 [n]).
// Refuses to overwrite existing files unless options.overwrite. Returns the files written.
std::vector<std::string> write_synthetic_classification(const SynthOptions& options);

}  // namespace mnddp
