// Dropout whose masks depend only on (run seed, optimizer step, global sample index, layer), never on
// the rank or on which samples share a batch, so a run resumed on another number of ranks draws the
// masks the uninterrupted run drew. See Note [Per-sample dropout keys] in sample_randomness.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

namespace mnddp {

// The 64-bit key of one row (sample) in one dropout layer: splitmix64 chained over the four values.
std::uint64_t sample_row_key(std::uint64_t seed, std::int64_t step, std::int64_t sample_id, int layer);

// Shared by one model and its SampleDropout layers. The trainer names the micro-batch about to go
// forward; each layer then turns its rows' keys into per-element masks. Used from one thread, as the
// model's forward is.
class SampleRandomness {
 public:
  // The next layer's number: 0, 1, 2, ... in construction order, so the same on every rank.
  int add_layer();
  int layers() const;

  // The micro-batch about to go forward: sample_ids[r] is the global dataset index of row r (dim 0).
  void set_batch(std::uint64_t seed, std::int64_t step, std::vector<std::int64_t> sample_ids);
  // Back to the state before any set_batch: rows keyed by position 0..B-1 at step 0, seed 0.
  void clear_batch();

  // True where layer keeps an element of `like` (bool, like's sizes, on like's device). A row's mask
  // depends only on its key and each element's C-order index within the row, not on like's strides.
  // p in (0, 1]. Throws Error when a batch was set and like's dim 0 is not its number of ids.
  at::Tensor keep_mask(int layer, const at::Tensor& like, double p);

 private:
  // [layers, rows, 2] int64: each row key's low and high 32 bits, on `device`; uploaded once per batch.
  at::Tensor keys_on(at::Device device, std::int64_t rows);

  int layers_ = 0;
  bool batch_set_ = false;
  std::uint64_t seed_ = 0;
  std::int64_t step_ = 0;
  std::vector<std::int64_t> sample_ids_;
  std::vector<std::pair<at::Device, at::Tensor>> device_keys_;  // emptied when the batch changes
};

// torch::nn::Dropout with masks from a SampleRandomness: x * keep / (1 - p) in training, x in eval.
class SampleDropoutImpl : public torch::nn::Module {
 public:
  SampleDropoutImpl(double p, std::shared_ptr<SampleRandomness> randomness);
  at::Tensor forward(const at::Tensor& input);
  void pretty_print(std::ostream& stream) const override;

  double p() const { return p_; }
  int layer() const { return layer_; }

 private:
  double p_;
  std::shared_ptr<SampleRandomness> randomness_;
  int layer_;
};
TORCH_MODULE(SampleDropout);

}  // namespace mnddp
