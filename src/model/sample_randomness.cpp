// Per-sample dropout masks: row keys on the host, per-element hashes by integer tensor ops on the
// tensor's own device.
//
// Note [Per-sample dropout keys]
// A row's key is splitmix64 chained over seed, step, sample id and layer, in exact uint64 arithmetic
// on the host. An element's 32-bit hash is murmur3's fmix32 applied twice: to (index ^ key_lo), then
// to (that ^ key_hi), where index is the element's C-order position within its row (its logical
// place, whatever the strides). The top 24 bits are the element's uniform draw; it is kept when they
// are >= ceil(p * 2^24). fmix32 is a bijection, so within one row no two elements share a hash.
// Tensors hold int64 values in [0, 2^32): each multiplication splits the 32-bit constant into 16-bit
// halves, so every product is below 2^48 and nothing overflows; nothing is negative, so >> is a
// logical shift. These are exact integer ops, so the CPU and CUDA draw bit-identical masks.
#include "mnddp/model/sample_randomness.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

constexpr std::int64_t kLow32 = 0xFFFFFFFF;
constexpr std::int64_t kLow16 = 0xFFFF;
constexpr int kUniformBits = 24;  // a float's mantissa, as torch's bernoulli draws

std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// h = h * c mod 2^32 for h in [0, 2^32): h * c_low + (h mod 2^16) * (c_high << 16), each term < 2^48.
// `scratch` (h's shape) saves an allocation per op: these ops are most of SampleDropout's time.
void multiply_mod32_(at::Tensor& h, std::uint32_t c, at::Tensor& scratch) {
  at::bitwise_and_out(scratch, h, kLow16);
  h.mul_(static_cast<std::int64_t>(c & kLow16)).add_(scratch, static_cast<std::int64_t>(c >> 16) << 16);
  h.bitwise_and_(kLow32);
}

void xor_shift_right_(at::Tensor& h, int bits, at::Tensor& scratch) {
  at::bitwise_right_shift_out(scratch, h, bits);
  h.bitwise_xor_(scratch);
}

// murmur3's 32-bit finaliser, in place.
void fmix32_(at::Tensor& h, at::Tensor& scratch) {
  xor_shift_right_(h, 16, scratch);
  multiply_mod32_(h, 0x85ebca6bU, scratch);
  xor_shift_right_(h, 13, scratch);
  multiply_mod32_(h, 0xc2b2ae35U, scratch);
  xor_shift_right_(h, 16, scratch);
}

}  // namespace

std::uint64_t sample_row_key(std::uint64_t seed, std::int64_t step, std::int64_t sample_id, int layer) {
  std::uint64_t key = splitmix64(seed);
  key = splitmix64(key ^ static_cast<std::uint64_t>(step));
  key = splitmix64(key ^ static_cast<std::uint64_t>(sample_id));
  return splitmix64(key ^ static_cast<std::uint64_t>(layer));
}

int SampleRandomness::add_layer() {
  device_keys_.clear();
  return layers_++;
}

int SampleRandomness::layers() const { return layers_; }

void SampleRandomness::set_batch(std::uint64_t seed, std::int64_t step, std::vector<std::int64_t> sample_ids) {
  batch_set_ = true;
  seed_ = seed;
  step_ = step;
  sample_ids_ = std::move(sample_ids);
  device_keys_.clear();
}

void SampleRandomness::clear_batch() {
  batch_set_ = false;
  seed_ = 0;
  step_ = 0;
  sample_ids_.clear();
  device_keys_.clear();
}

at::Tensor SampleRandomness::keys_on(at::Device device, std::int64_t rows) {
  const auto ids = static_cast<std::int64_t>(sample_ids_.size());
  if (batch_set_ && rows != ids)
    throw Error(
        fmt::format("internal error: a dropout layer got a tensor of {} rows (dim 0), but set_batch named {} "
                    "samples for this batch",
                    rows, ids));
  if (!batch_set_ && rows != ids) {  // rows keyed by position
    sample_ids_.resize(rows);
    std::iota(sample_ids_.begin(), sample_ids_.end(), std::int64_t{0});
    device_keys_.clear();
  }
  for (const auto& [on, keys] : device_keys_)
    if (on == device) return keys;
  if (device_keys_.empty()) {  // the host table, which every device's copy comes from
    at::Tensor host = at::empty({layers_, rows, 2}, at::kLong);
    auto* out = host.data_ptr<std::int64_t>();
    for (int layer = 0; layer < layers_; ++layer)
      for (const std::int64_t id : sample_ids_) {
        const std::uint64_t key = sample_row_key(seed_, step_, id, layer);
        *out++ = static_cast<std::int64_t>(key & kLow32);
        *out++ = static_cast<std::int64_t>(key >> 32);
      }
    device_keys_.emplace_back(at::Device(at::kCPU), host);
    if (device.is_cpu()) return host;
  }
  // One small copy per batch and device, from pinned memory so that it does not wait for the work
  // already queued on the device (a copy from pageable memory would).
  at::Tensor keys = device_keys_.front().second.pin_memory().to(device, /*non_blocking=*/true);
  device_keys_.emplace_back(device, keys);
  return keys;
}

at::Tensor SampleRandomness::keep_mask(int layer, const at::Tensor& like, double p) {
  if (layer < 0 || layer >= layers_)
    throw std::logic_error(fmt::format("SampleRandomness: no dropout layer {} (there are {})", layer, layers_));
  if (like.dim() == 0) throw Error("internal error: dropout needs a batch dimension, but got a scalar");
  const std::int64_t rows = like.size(0);
  std::int64_t row_numel = 1;
  for (std::int64_t d = 1; d < like.dim(); ++d) row_numel *= like.size(d);
  if (row_numel > (std::int64_t{1} << 32))
    throw Error(fmt::format("dropout: a row of {} elements is more than the 2^32 that its hash can index", row_numel));
  const at::Tensor keys = keys_on(like.device(), rows).select(0, layer);  // [rows, 2]
  // (h >> 8) >= ceil(p * 2^24), as one comparison.
  const std::int64_t threshold = static_cast<std::int64_t>(std::ceil(p * (1 << kUniformBits))) << (32 - kUniformBits);

  std::vector<std::int64_t> index_shape = like.sizes().vec();
  index_shape[0] = 1;
  const at::Tensor index = at::arange(row_numel, keys.options()).view(index_shape);
  at::Tensor keep = at::empty(like.sizes(), at::TensorOptions().dtype(at::kBool).device(like.device()));
  // A block of rows at a time. On the CPU, a block whose two int64 buffers stay in the L2 cache hashes
  // twice as fast as one pass over a large tensor (measured); on a GPU the block bounds the transient
  // memory (16 bytes an element).
  const std::int64_t block_elements = like.is_cpu() ? std::int64_t{1} << 16 : std::int64_t{1} << 24;
  const std::int64_t block = std::clamp<std::int64_t>(block_elements / std::max<std::int64_t>(row_numel, 1), 1,
                                                      std::max<std::int64_t>(rows, 1));
  std::vector<std::int64_t> block_shape = index_shape;
  block_shape[0] = block;
  const at::Tensor h_buffer = at::empty(block_shape, keys.options());
  const at::Tensor scratch_buffer = at::empty_like(h_buffer);
  std::vector<std::int64_t> key_shape(like.dim(), 1);
  for (std::int64_t first = 0; first < rows; first += block) {
    const std::int64_t n = std::min(block, rows - first);
    key_shape[0] = n;
    const at::Tensor block_keys = keys.slice(0, first, first + n);
    at::Tensor h = h_buffer.slice(0, 0, n);
    at::Tensor scratch = scratch_buffer.slice(0, 0, n);
    at::bitwise_xor_out(h, index, block_keys.select(1, 0).reshape(key_shape));
    fmix32_(h, scratch);
    h.bitwise_xor_(block_keys.select(1, 1).reshape(key_shape));
    fmix32_(h, scratch);
    at::Tensor keep_block = keep.slice(0, first, first + n);
    at::ge_out(keep_block, h, threshold);
  }
  return keep;
}

SampleDropoutImpl::SampleDropoutImpl(double p, std::shared_ptr<SampleRandomness> randomness)
    : p_(p), randomness_(std::move(randomness)) {
  if (!(p >= 0.0 && p <= 1.0)) throw UsageError(fmt::format("dropout probability must be in [0, 1], got {}", p));
  if (!randomness_) throw std::invalid_argument("SampleDropout: no SampleRandomness");
  layer_ = randomness_->add_layer();
}

at::Tensor SampleDropoutImpl::forward(const at::Tensor& input) {
  if (!is_training() || p_ == 0.0) return input;
  // As torch's dropout: zeros that keep the input's graph (and its NaNs).
  if (p_ == 1.0) return input * at::zeros({}, input.options());
  // x * keep, then the scale 1 / (1 - p) as a float multiplier (as torch's fused CUDA dropout does;
  // in bf16 the scale itself would round: 1/0.9 -> 1.109375); its gradient is keep * scale.
  return (input * randomness_->keep_mask(layer_, input, p_)).mul(1.0 / (1.0 - p_));
}

void SampleDropoutImpl::pretty_print(std::ostream& stream) const {
  stream << "mnddp::SampleDropout(p=" << p_ << ", layer=" << layer_ << ")";
}

}  // namespace mnddp
