// --shuffle-unit chunk: the sampler's and the reader's settings.
#include "mnddp/data/chunk_order.hpp"

namespace mnddp {

void deal_chunks(SamplerOptions& sampling, const ShardIndex& index, std::int64_t window) {
  sampling.mode = PartitionMode::Shard;
  sampling.shard_sizes = index.chunk_sizes(sampling.batch_size);
  sampling.window_shards = window;
}

void keep_window_decoded(H5ReaderOptions& reading, std::int64_t window) { reading.min_cached_chunks = 2 * window; }

}  // namespace mnddp
