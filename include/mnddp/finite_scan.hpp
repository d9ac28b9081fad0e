// Whether an array of IEEE floats holds a NaN or an infinity, read once as integers: a value is
// non-finite exactly when its exponent bits are all ones, so the largest exponent field of the
// array decides. Fixed-size blocks let -O2 vectorise; on x86-64 an AVX2 clone is picked at load time
// where the CPU has it (the scan is bound by the cache's bandwidth, so AVX-512 adds nothing).
// Shared by the data reader (--nonfinite-inputs) and the gradient check (--on-nonfinite).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mnddp {

// GCC only: clang does not clone function templates (its build, the fuzz one, scans without AVX2).
// Not under ThreadSanitizer: the clone's resolver runs, instrumented, before TSan's runtime is up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define MNDDP_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define MNDDP_AVX2_CLONE
#endif

// True when none of the n values of `Bits` width at `bytes` has all of `exponent`'s bits set.
template <typename Bits>
MNDDP_AVX2_CLONE bool finite_bits(const unsigned char* bytes, std::int64_t n, Bits exponent) {
  constexpr std::int64_t kBlock = 64;
  Bits worst = 0;
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Bits block = 0;
    for (std::int64_t j = 0; j < kBlock; ++j) {
      Bits b;
      std::memcpy(&b, bytes + (i + j) * sizeof(Bits), sizeof(Bits));
      block = std::max<Bits>(block, b & exponent);
    }
    worst = std::max(worst, block);
  }
  for (; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));
    worst = std::max<Bits>(worst, b & exponent);
  }
  return worst != exponent;
}

inline bool all_finite(const float* values, std::size_t count) {
  return finite_bits<std::uint32_t>(reinterpret_cast<const unsigned char*>(values), static_cast<std::int64_t>(count),
                                    0x7f800000u);
}

}  // namespace mnddp
