// Fuzz harness: the HDF5 shard scanner and reader on any file: scanned as a training shard (x, y),
// then its first and last rows read as the loader reads them. A file that is not a usable shard must
// be one UsageError naming it, never a crash, a hang or a huge allocation.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "h5_quiet.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 1024 * 1024) return -1;
  mnddp::fuzz::quiet_hdf5();
  const mnddp::fuzz::MemoryFile file(data, size);
  try {
    mnddp::ShardIndex index = mnddp::scan_shards({file.path()}, "x", "y");
    const std::int64_t samples = index.num_samples();
    // Rows of over 64 Mi values are real data for some (3-D volumes), not a damaged file: not read here.
    const auto numel = static_cast<std::size_t>(index.sample_numel());
    if (samples == 0 || numel > (64u << 20)) return 0;
    const std::int64_t rows[] = {0, samples - 1};
    mnddp::H5Reader reader(std::move(index));
    std::vector<float> x(2 * numel);
    std::vector<std::int64_t> y(2);
    reader.read(rows, x.data(), y.data());
  } catch (const mnddp::Error& e) {
    if (std::getenv("MNDDP_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", e.what());
  }
  return 0;
}
