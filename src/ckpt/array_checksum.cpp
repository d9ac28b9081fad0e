// XXH3-64 block checksums of checkpoint arrays (see the header for the definition).
#include "mnddp/ckpt/array_checksum.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace mnddp {

// The block hashes are hashed as they lie in memory: little-endian on every host mnddp targets.
static_assert(std::endian::native == std::endian::little, "checkpoint checksums assume a little-endian host");

std::size_t checksum_block_count(std::size_t bytes) { return (bytes + kChecksumBlockBytes - 1) / kChecksumBlockBytes; }

std::pair<std::size_t, std::size_t> checksum_blocks_share(std::size_t blocks, std::size_t share, std::size_t shares) {
  return {blocks * share / shares, blocks * (share + 1) / shares};
}

std::uint64_t block_hash(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

std::uint64_t checksum_of_blocks(const std::vector<std::uint64_t>& block_hashes) {
  return XXH3_64bits(block_hashes.data(), block_hashes.size() * sizeof(std::uint64_t));
}

std::uint64_t array_checksum(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::vector<std::uint64_t> hashes(checksum_block_count(bytes));
  for (std::size_t b = 0; b < hashes.size(); ++b) {
    const std::size_t offset = b * kChecksumBlockBytes;
    hashes[b] = block_hash(p + offset, std::min(kChecksumBlockBytes, bytes - offset));
  }
  return checksum_of_blocks(hashes);
}

struct StreamingArrayChecksum::State {
  struct FreeState {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, FreeState> block{XXH3_createState()};
  std::size_t filled = 0;  // bytes of the block in progress
  std::vector<std::uint64_t> hashes;
};

StreamingArrayChecksum::StreamingArrayChecksum() : state_(std::make_unique<State>()) {
  if (!state_->block) throw std::bad_alloc();
}

StreamingArrayChecksum::~StreamingArrayChecksum() = default;

void StreamingArrayChecksum::update(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  State& s = *state_;
  while (bytes > 0) {
    if (s.filled == 0 && bytes >= kChecksumBlockBytes) {  // a whole block in place: one call
      s.hashes.push_back(block_hash(p, kChecksumBlockBytes));
      p += kChecksumBlockBytes;
      bytes -= kChecksumBlockBytes;
      continue;
    }
    if (s.filled == 0) XXH3_64bits_reset(s.block.get());
    const std::size_t take = std::min(bytes, kChecksumBlockBytes - s.filled);
    XXH3_64bits_update(s.block.get(), p, take);
    s.filled += take;
    p += take;
    bytes -= take;
    if (s.filled == kChecksumBlockBytes) {
      s.hashes.push_back(XXH3_64bits_digest(s.block.get()));
      s.filled = 0;
    }
  }
}

std::uint64_t StreamingArrayChecksum::finish() {
  State& s = *state_;
  if (s.filled > 0) {
    s.hashes.push_back(XXH3_64bits_digest(s.block.get()));
    s.filled = 0;
  }
  return checksum_of_blocks(s.hashes);
}

}  // namespace mnddp
