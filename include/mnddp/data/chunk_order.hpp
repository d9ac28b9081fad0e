// --shuffle-unit chunk, set up in one place for the trainer (train/module_options.cpp) and the
// loader benchmark: the chunks of the shards play the files of shard mode, dealt to ranks by an
// epoch-seeded permutation, each rank shuffling the samples of `window` of its chunks at a time.
#pragma once

#include <cstdint>

#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"

namespace mnddp {

// Turns `sampling` (num_samples, batch_size, seed... already set) into the chunk order over
// `index`; unchunked shards count as chunks of one batch.
void deal_chunks(SamplerOptions& sampling, const ShardIndex& index, std::int64_t window);

// Keeps two windows' chunks decoded in `reading` (a batch may end one window and start the next),
// besides the chunks of one batch.
void keep_window_decoded(H5ReaderOptions& reading, std::int64_t window);

}  // namespace mnddp
