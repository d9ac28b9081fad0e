// The checksum of a checkpoint array (format 2): the array's bytes in C order are cut into blocks
// of kChecksumBlockBytes (the last one shorter), each block is hashed with XXH3-64 (seed 0), and the
// array's checksum is XXH3-64 of those block hashes as little-endian uint64s, in order (of no bytes
// for an empty array). Blocks let ranks hash parts of an array at once, and the value depends only
// on the bytes, not on how many ranks wrote the file. XXH3 runs at tens of GB/s on one core, so the
// checksum no longer competes with the I/O for the CPU (format 1's CRC-32 ran at about 4 GB/s).
// docs/CHECKPOINT_FORMAT.md shows the same computation with h5py and the `xxhash` wheel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace mnddp {

inline constexpr std::size_t kChecksumBlockBytes = std::size_t{1} << 20;

// How many blocks `bytes` bytes make.
std::size_t checksum_block_count(std::size_t bytes);
// Share `share` of `shares` of an array's `blocks` checksum blocks: [blocks*share/shares,
// blocks*(share+1)/shares). How the writers and the parallel verification spread the hashing.
std::pair<std::size_t, std::size_t> checksum_blocks_share(std::size_t blocks, std::size_t share, std::size_t shares);
// XXH3-64 of one block (or of any bytes).
std::uint64_t block_hash(const void* data, std::size_t bytes);
// The array checksum from its block hashes, in order.
std::uint64_t checksum_of_blocks(const std::vector<std::uint64_t>& block_hashes);
// The array checksum of `bytes` bytes in memory.
std::uint64_t array_checksum(const void* data, std::size_t bytes);

// The array checksum of bytes that arrive in pieces of any size, in order.
class StreamingArrayChecksum {
 public:
  StreamingArrayChecksum();
  ~StreamingArrayChecksum();
  StreamingArrayChecksum(const StreamingArrayChecksum&) = delete;
  StreamingArrayChecksum& operator=(const StreamingArrayChecksum&) = delete;

  void update(const void* data, std::size_t bytes);
  std::uint64_t finish();  // the checksum of everything passed to update()

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mnddp
