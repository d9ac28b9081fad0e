// Synthetic datasets for demos, tests and benchmarks, written as HDF5 shards: a learnable
// classification problem (Gaussian class prototypes plus noise), a linear regression one with k
// targets, or token sequences from a sparse Markov chain (language modelling).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

enum class SynthTask { Classification, Regression, Lm };

// Lm: every token is followed by one of this many successors (fixed per token), uniformly, so the
// best possible next-token loss is log(kSynthSuccessors) nats, far below log(vocab).
inline constexpr int kSynthSuccessors = 2;

struct SynthOptions {
  SynthTask task = SynthTask::Classification;
  std::string out_dir;
  std::int64_t train_samples = 8192;
  std::int64_t val_samples = 2048;
  int shards = 4;                                 // train shards (val gets max(1, shards/2))
  std::vector<std::int64_t> shape = {1, 28, 28};  // one sample's shape
  int num_classes = 10;                           // classification only
  int targets = 1;                                // regression: y [n] for 1, y [n, targets] above
  int vocab = 256;                                // lm: token ids in [0, vocab); shape is [tokens]
  double noise = 1.0;  // std of the noise around the class prototype, or added to the regression target
  std::uint64_t seed = 1234;
  std::string x_name = "x";
  std::string y_name = "y";
  bool overwrite = false;
};

// Writes <out_dir>/train_NNN.h5 and <out_dir>/val_NNN.h5 (x: float32 [n, shape...]; y: int64 [n]
// class labels, or float32 [n] / [n, targets] regression targets; lm: x uint16 (uint32 above 65536
// tokens) [n, shape[0]] and no y). Refuses to overwrite existing files unless options.overwrite.
// Returns the files written.
std::vector<std::string> write_synthetic_dataset(const SynthOptions& options);
// The same with options.task forced to classification.
std::vector<std::string> write_synthetic_classification(const SynthOptions& options);

}  // namespace mnddp
