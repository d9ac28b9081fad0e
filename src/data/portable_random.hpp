// Random numbers that are the same on every platform and compiler. std::mt19937_64 is fully
// specified by the standard, but std::uniform_int_distribution, std::normal_distribution and
// std::shuffle are not, so ranks built differently could disagree on a permutation.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace mnddp::detail {

// SplitMix64 finaliser: turns structured inputs (seed, epoch) into well-spread generator seeds.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A generator seed derived from a user seed and a stream number (epoch, data split, ...).
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(seed ^ splitmix64(stream));
}

// Uniform integer in [0, bound), bound >= 1, without modulo bias: draws below 2^64 mod bound are
// rejected so every remainder is equally likely.
inline std::uint64_t bounded_random(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // (2^64 - bound) mod bound = 2^64 mod bound
  for (;;) {
    const std::uint64_t draw = rng();
    if (draw >= threshold) return draw % bound;
  }
}

// Uniform double in [0, 1) from the top 53 bits.
inline double unit_random(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Standard normal pairs by Box-Muller, so the sequence depends only on the generator's output.
class NormalSource {
 public:
  double next(std::mt19937_64& rng) {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - unit_random(rng);  // (0, 1]: log(u1) is finite
    const double u2 = unit_random(rng);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace mnddp::detail
