// Data-loader benchmark (results in docs/BENCHMARKS.md): epochs through Loader as the trainer's rank 0
// of 1 reads them (sample partition, batch 256, prefetch 4, batches consumed as fast as possible),
// shuffled and in file order, against a raw sequential read() of every shard file's bytes in the
// same run. Alternating rounds, medians. Each round opens a fresh reader and times its first epoch
// (every input checked for NaN/inf, --nonfinite-inputs error) and a later one (rows already checked
// are not checked again). Usage: mnddp-bench-loader [options] NAME=DIR ...
//   --rounds N        rounds (default 3)
//   --orders LIST     shuffled,sequential,chunk (default shuffled,sequential); chunk: --shuffle-unit chunk
//                     with the trainer's default window (8 chunks)
//   --max-batches N   time only the first N batches of each epoch (0: all)
//   --nonfinite P     the reader's non-finite input policy: error (default, as the trainer), warn, ignore
//   --decode-threads N threads inflating compressed chunks (the trainer's --loader-threads; default 1)
//   --cold            drop the page cache (needs root) before every timed pass; otherwise one untimed
//                     raw pass first, so that every timed pass reads from the page cache.
// Prints: case cache order epoch MB file_MB raw_MB/s ours_MB/s ratio (ratio = ours / raw MB/s).
// Exit 2: --cold, but the page cache cannot be dropped here.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mnddp/data/chunk_order.hpp"
#include "mnddp/data/data_paths.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/loader.hpp"
#include "mnddp/data/sampler.hpp"
#include "mnddp/data/shard_index.hpp"

#include "bench_util.hpp"

using namespace mnddp;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

constexpr std::int64_t kBatchSize = 256;
constexpr int kPrefetch = 4;
constexpr std::size_t kRawReadBytes = std::size_t{64} << 20;

// Writes dirty pages back, then asks the kernel to drop clean ones. False when not permitted.
bool drop_page_cache() {
  ::sync();
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "3", 1) == 1;
  ::close(fd);
  return ok;
}

// The baseline: every byte of every file, in order, with 64 MiB read()s into one buffer.
double raw_read(const std::vector<std::string>& paths, std::vector<char>& buffer) {
  double bytes = 0;
  for (const auto& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + path);
    ssize_t n = 0;
    while ((n = ::read(fd, buffer.data(), buffer.size())) > 0) bytes += static_cast<double>(n);
    ::close(fd);
  }
  return bytes;
}

enum class Order { Shuffled, Sequential, Chunk };
constexpr std::int64_t kShuffleWindow = 8;  // --shuffle-window's default

const char* order_name(Order order) {
  return order == Order::Shuffled ? "shuffled" : order == Order::Sequential ? "sequential" : "chunk";
}

struct Options {
  int rounds = 3;
  bool cold = false;
  std::int64_t max_batches = 0;
  int decode_threads = 1;
  NonfinitePolicy nonfinite = NonfinitePolicy::Error;
  std::vector<Order> orders = {Order::Shuffled, Order::Sequential};
};

// Samples delivered by one epoch of `sampler` through a Loader on `reader`.
std::int64_t loader_epoch(H5Reader& reader, const DistributedSampler& sampler, std::int64_t epoch,
                          std::int64_t max_batches) {
  auto indices = sampler.epoch_indices(epoch);
  if (max_batches > 0) indices.resize(std::min(indices.size(), static_cast<std::size_t>(max_batches * kBatchSize)));
  Loader loader(reader, std::move(indices), kBatchSize, kPrefetch);
  std::int64_t samples = 0;
  while (auto batch = loader.next()) samples += batch->size;
  return samples;
}

struct Case {
  std::string name;
  std::vector<std::string> paths;
  ShardIndex index;
  double file_bytes = 0;
};

struct Timings {
  std::vector<double> seconds;
  std::int64_t samples = 0;
};

void run_case(const Case& c, const Options& options, std::vector<char>& buffer) {
  const double sample_bytes = static_cast<double>(c.index.sample_numel() * sample_type_size(c.index.sample_type)) +
                              static_cast<double>(sample_type_size(c.index.label_type));
  if (!options.cold) raw_read(c.paths, buffer);  // untimed: brings the files into the page cache
  std::vector<double> raw_s;
  std::vector<Timings> ours(options.orders.size() * 2);  // [order][first, later]
  const auto timed = [&](auto&& work) {
    if (options.cold) drop_page_cache();
    const auto t = Clock::now();
    work();
    return seconds_since(t);
  };
  for (int round = 0; round < options.rounds; ++round) {
    // Which side goes first alternates, so drift (other load, cache state) hits both alike.
    const auto run_raw = [&] { raw_s.push_back(timed([&] { raw_read(c.paths, buffer); })); };
    if (round % 2 == 0) run_raw();
    for (std::size_t o = 0; o < options.orders.size(); ++o) {
      SamplerOptions sampling;
      sampling.num_samples = c.index.num_samples();
      sampling.batch_size = kBatchSize;
      sampling.shuffle = options.orders[o] != Order::Sequential;
      sampling.seed = static_cast<std::uint64_t>(round + 1);
      H5ReaderOptions reading{options.nonfinite, kBatchSize};
      if (options.orders[o] == Order::Chunk) {  // as the trainer sets it up
        deal_chunks(sampling, c.index, kShuffleWindow);
        keep_window_decoded(reading, kShuffleWindow);
      }
      const DistributedSampler sampler(sampling);
      // As the trainer: one reader for the run, opened before the first epoch.
      reading.decode_threads = options.decode_threads;
      H5Reader reader(c.index, reading);
      for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
        Timings& t = ours[o * 2 + static_cast<std::size_t>(epoch)];
        t.seconds.push_back(timed([&] { t.samples = loader_epoch(reader, sampler, epoch, options.max_batches); }));
      }
    }
    if (round % 2 == 1) run_raw();
  }
  const double raw_mbps = c.file_bytes / 1e6 / median(raw_s);
  for (std::size_t o = 0; o < options.orders.size(); ++o)
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
      const Timings& t = ours[o * 2 + epoch];
      const double mb = static_cast<double>(t.samples) * sample_bytes / 1e6;
      const double ours_mbps = mb / median(t.seconds);
      std::printf("%-15s %-5s %-10s %-5s %8.0f %8.0f %10.0f %10.0f %7.2f\n", c.name.c_str(),
                  options.cold ? "cold" : "warm", order_name(options.orders[o]), epoch == 0 ? "first" : "later", mb,
                  c.file_bytes / 1e6, raw_mbps, ours_mbps, ours_mbps / raw_mbps);
    }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) try {
  Options options;
  std::vector<Case> cases;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--rounds" && has_value) {
      options.rounds = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "--max-batches" && has_value) {
      options.max_batches = std::max(0, std::atoi(argv[++a]));
    } else if (arg == "--orders" && has_value) {
      const std::string list = argv[++a];
      options.orders.clear();
      if (list.find("shuffled") != std::string::npos) options.orders.push_back(Order::Shuffled);
      if (list.find("sequential") != std::string::npos) options.orders.push_back(Order::Sequential);
      if (list.find("chunk") != std::string::npos) options.orders.push_back(Order::Chunk);
    } else if (arg == "--decode-threads" && has_value) {
      options.decode_threads = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "--nonfinite" && has_value) {
      options.nonfinite = parse_choice_or_throw<NonfinitePolicy>(argv[++a], "--nonfinite");
    } else if (arg == "--cold") {
      options.cold = true;
    } else if (const auto eq = arg.find('='); eq != std::string::npos && arg[0] != '-') {
      Case c{arg.substr(0, eq), expand_data_paths(arg.substr(eq + 1), "NAME=DIR"), {}, 0};
      c.index = scan_shards(c.paths, "x", "y");
      for (const auto& path : c.paths) c.file_bytes += static_cast<double>(std::filesystem::file_size(path));
      cases.push_back(std::move(c));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds N] [--orders shuffled,sequential] [--max-batches N] [--nonfinite P] "
                   "[--decode-threads N] [--cold] "
                   "NAME=DIR ...\n",
                   argv[0]);
      return 1;
    }
  }
  if (cases.empty() || options.orders.empty()) {
    std::fprintf(stderr, "%s: nothing to measure (give NAME=DIR and at least one order)\n", argv[0]);
    return 1;
  }
  if (options.cold && !drop_page_cache()) {
    std::fprintf(stderr, "cannot drop the page cache (/proc/sys/vm/drop_caches): no cold run\n");
    return 2;
  }
  std::vector<char> buffer(kRawReadBytes);
  for (const auto& c : cases) run_case(c, options, buffer);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
  return 1;
}
