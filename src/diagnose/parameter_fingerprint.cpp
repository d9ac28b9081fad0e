// Parameter fingerprints: XXH3 of host bytes; a weighted integer sum on the device.
#include "mnddp/diagnose/parameter_fingerprint.hpp"

#include <ATen/ATen.h>
#include <xxhash.h>

#include <stdexcept>

namespace mnddp {
namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 22;  // elements reduced at once: bounds the temporaries
constexpr std::int64_t kGolden = static_cast<std::int64_t>(0x9E3779B97F4A7C15ull);

// The tensor's elements as integers of the same width (a view of the same bits).
at::Tensor bits_of(const at::Tensor& t) {
  const at::Tensor flat = t.detach().contiguous().reshape({-1});
  if (!flat.is_floating_point()) return flat;
  switch (flat.element_size()) {
    case 8:
      return flat.view(at::kLong);
    case 4:
      return flat.view(at::kInt);
    case 2:
      return flat.view(at::kShort);
    default:
      throw std::invalid_argument("parameter_fingerprint: unsupported element size");
  }
}

}  // namespace

std::uint64_t reduced_fingerprint(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> sums;
  for (const auto& p : parameters) {
    const at::Tensor bits = bits_of(p);
    const std::int64_t n = bits.numel();
    at::Tensor total = at::zeros({}, bits.options().dtype(at::kLong));
    for (std::int64_t start = 0; start < n; start += kChunk) {
      const std::int64_t count = std::min(kChunk, n - start);
      // Odd weights: a change of one element by d changes the sum by d * odd, never 0 mod 2^64.
      const at::Tensor weights =
          at::arange(start, start + count, bits.options().dtype(at::kLong)).mul_(kGolden).bitwise_or_(1);
      total.add_((bits.narrow(0, start, count).to(at::kLong) * weights).sum());
    }
    sums.push_back(total);
  }
  if (sums.empty()) return 0;
  const at::Tensor host = at::stack(sums).cpu();  // one transfer, one synchronisation
  return XXH3_64bits(host.data_ptr(), static_cast<std::size_t>(host.nbytes()));
}

std::uint64_t parameter_fingerprint(const std::vector<at::Tensor>& parameters, bool device_method) {
  if (device_method) return reduced_fingerprint(parameters);
  std::uint64_t hash = 0;
  for (const auto& p : parameters) {
    const at::Tensor flat = p.detach().contiguous();
    hash = XXH3_64bits_withSeed(flat.data_ptr(), static_cast<std::size_t>(flat.nbytes()), hash);
  }
  return hash;
}

void flip_mantissa_bit(const at::Tensor& parameter) {
  at::NoGradGuard no_grad;
  at::Tensor flat = parameter.detach().view({-1});
  const int mantissa = flat.scalar_type() == at::kDouble  ? 52
                       : flat.scalar_type() == at::kFloat ? 23
                       : flat.scalar_type() == at::kHalf  ? 10
                                                          : 7;  // bfloat16
  const at::Tensor first = bits_of(flat.narrow(0, 0, 1));
  flat.narrow(0, 0, 1).copy_(first.bitwise_xor(std::int64_t{1} << (mantissa - 1)).view(flat.scalar_type()));
}

}  // namespace mnddp
