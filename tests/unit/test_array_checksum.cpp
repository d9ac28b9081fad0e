// The XXH3-64 block checksum of checkpoint arrays: streamed in pieces of any size (across block
// boundaries, byte by byte) it equals the one-shot value; it is the documented two-level hash (so
// h5py users can recompute it); and it sees a changed byte, a moved block and a truncation.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

#include "mnddp/ckpt/array_checksum.hpp"

using namespace mnddp;

namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(generator());
  return bytes;
}

std::uint64_t streamed(const std::vector<std::uint8_t>& bytes, std::mt19937& generator, std::size_t max_piece) {
  StreamingArrayChecksum checksum;
  std::uniform_int_distribution<std::size_t> piece(0, max_piece);
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t n = std::min(piece(generator), bytes.size() - at);
    checksum.update(bytes.data() + at, n);
    at += n;
  }
  return checksum.finish();
}

TEST(ArrayChecksum, IsXxh3OfTheBlockHashes) {
  const std::size_t block = kChecksumBlockBytes;
  const auto bytes = random_bytes(2 * block + 12345, 1);
  const std::uint64_t blocks[3] = {XXH3_64bits(bytes.data(), block), XXH3_64bits(bytes.data() + block, block),
                                   XXH3_64bits(bytes.data() + 2 * block, 12345)};
  EXPECT_EQ(array_checksum(bytes.data(), bytes.size()), XXH3_64bits(blocks, sizeof(blocks)));
  EXPECT_EQ(array_checksum(nullptr, 0), XXH3_64bits(nullptr, 0));  // no blocks
  EXPECT_EQ(checksum_block_count(0), 0u);
  EXPECT_EQ(checksum_block_count(block), 1u);
  EXPECT_EQ(checksum_block_count(block + 1), 2u);
}

TEST(ArrayChecksum, StreamingInAnyPiecesEqualsOneShot) {
  std::mt19937 generator(2);
  const std::size_t block = kChecksumBlockBytes;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, block - 1, block, block + 1, 3 * block + 777}) {
    const auto bytes = random_bytes(n, static_cast<unsigned>(n));
    const std::uint64_t expected = array_checksum(bytes.data(), bytes.size());
    for (const std::size_t max_piece : {std::size_t{1} << 8, block / 3, block, 5 * block}) {
      if (max_piece < 1024 && n > 2 * block) continue;  // byte-sized pieces over megabytes: slow, no news
      EXPECT_EQ(streamed(bytes, generator, max_piece), expected) << n << " bytes in pieces up to " << max_piece;
    }
  }
}

TEST(ArrayChecksum, SeesAChangedByteAMovedBlockAndATruncation) {
  const std::size_t block = kChecksumBlockBytes;
  auto bytes = random_bytes(3 * block, 3);
  const std::uint64_t original = array_checksum(bytes.data(), bytes.size());
  bytes[2 * block + 5] ^= 1;
  EXPECT_NE(array_checksum(bytes.data(), bytes.size()), original);
  bytes[2 * block + 5] ^= 1;
  std::swap_ranges(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(block),
                   bytes.begin() + static_cast<std::ptrdiff_t>(block));  // blocks 0 and 1 swapped
  EXPECT_NE(array_checksum(bytes.data(), bytes.size()), original);
  EXPECT_NE(array_checksum(bytes.data(), bytes.size() - 1), original);
}

}  // namespace
