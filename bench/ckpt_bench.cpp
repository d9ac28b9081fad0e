// Checkpoint I/O benchmark (results in docs/BENCHMARKS.md): writing a state of --mb megabytes with
// the parallel-HDF5 writer (every rank writes its row range, then fsync and atomic rename, as the
// trainer commits) against a raw sequential write of the same bytes with fsync by one rank; and
// reading it back (CheckpointReader, checksums verified) against a raw sequential read, from the
// page cache and from storage. Alternating, medians. Usage: mpirun -np N mnddp-bench-ckpt DIR [mb] [reps]
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/comm/mpi_comm.hpp"

#include "bench_util.hpp"

using namespace mnddp;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

void raw_write(const std::string& path, const std::vector<float>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const char* bytes = reinterpret_cast<const char*>(data.data());
  std::size_t left = data.size() * sizeof(float);
  while (left > 0) {
    const ssize_t n = ::write(fd, bytes, std::min<std::size_t>(left, 64u << 20));
    if (n <= 0) break;
    bytes += n;
    left -= static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

template <class F>
double timed(F&& body) {
  const auto t = Clock::now();
  body();
  return seconds_since(t);
}

// Drops the file's (clean, fsynced) pages from the page cache so the next read comes from storage.
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void raw_read(const std::string& path, std::vector<char>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, buffer.data(), buffer.size()) > 0) {
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    MpiComm world;
    const std::string dir = argc > 1 ? argv[1] : "/tmp/mnddp-ckpt-bench";
    const std::size_t megabytes = argc > 2 ? std::stoul(argv[2]) : 512;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
    const bool verbose = std::getenv("MNDDP_BENCH_VERBOSE") != nullptr;
    if (world.is_root()) std::filesystem::create_directories(dir);
    world.barrier();

    // A model-like state: 16 tensors of equal size (rows of 1024 floats).
    const std::size_t tensors = 16;
    const std::size_t rows = megabytes * (1u << 20) / sizeof(float) / 1024 / tensors;
    std::vector<float> state(tensors * rows * 1024);
    for (std::size_t i = 0; i < state.size(); ++i) state[i] = static_cast<float>(i % 9973) * 0.5f;
    const double bytes = static_cast<double>(state.size() * sizeof(float));
    CheckpointManager manager(dir + "/ckpt", reps + 1, world);
    const std::string raw_path = dir + "/raw.bin";

    // Each timed step starts with the other file's pages dropped: on a VM, a write that needs fresh
    // guest memory instead of recycled page-cache pages runs several times slower, whoever writes.
    auto ours_write = [&](int rep) {
      world.barrier();
      const auto t = Clock::now();
      const std::string path = manager.save(
          rep, static_cast<std::uint64_t>(bytes),
          [&](ParallelCheckpointWriter& writer) {
            for (std::size_t k = 0; k < tensors; ++k)
              writer.write({"model/t" + std::to_string(k),
                            DType::F32,
                            {static_cast<std::int64_t>(rows), 1024},
                            state.data() + k * rows * 1024});
          },
          world);
      world.barrier();
      const double seconds = seconds_since(t);
      if (world.is_root()) evict(path);
      return std::make_pair(path, seconds);
    };
    auto raw_write_timed = [&] {
      if (world.is_root()) std::filesystem::remove(raw_path);
      world.barrier();
      const auto t = Clock::now();
      if (world.is_root()) raw_write(raw_path, state);
      world.barrier();
      const double seconds = seconds_since(t);
      if (world.is_root()) evict(raw_path);
      return seconds;
    };

    std::vector<double> ours_w, raw_w, ours_r, raw_r, ours_c, raw_c;
    std::vector<char> buffer(64u << 20);
    for (int rep = 0; rep < reps; ++rep) {
      std::string path;
      double ours = 0, raw = 0;
      if (rep % 2 == 0) {
        std::tie(path, ours) = ours_write(rep);
        raw = raw_write_timed();
      } else {
        raw = raw_write_timed();
        std::tie(path, ours) = ours_write(rep);
      }
      ours_w.push_back(ours);
      raw_w.push_back(raw);
      if (world.is_root()) {
        // Cold: from storage (a requeued job on another node); this read leaves the file cached.
        ours_c.push_back(timed([&] { CheckpointReader(path).verify_all(); }));
        evict(path);
        raw_c.push_back(timed([&] { raw_read(raw_path, buffer); }));
        evict(raw_path);
        // Warm: from the page cache (a resume right after a save on the same node).
        raw_read(path, buffer);
        ours_r.push_back(timed([&] { CheckpointReader(path).verify_all(); }));
        evict(path);
        raw_read(raw_path, buffer);
        raw_r.push_back(timed([&] { raw_read(raw_path, buffer); }));
        evict(raw_path);
        if (verbose)
          std::fprintf(stderr, "rep %d: write %.3f raw %.3f | warm read %.3f raw %.3f | cold read %.3f raw %.3f\n", rep,
                       ours, raw, ours_r.back(), raw_r.back(), ours_c.back(), raw_c.back());
      }
    }
    if (world.is_root()) {
      const double mb = bytes / 1e6;
      auto row = [&](const char* what, const std::vector<double>& ours, const std::vector<double>& raw) {
        std::printf("%5d %6.0f  %-10s %9.0f %9.0f %7.2f\n", world.size(), mb, what, mb / median(ours), mb / median(raw),
                    median(raw) / median(ours));
      };
      row("write", ours_w, raw_w);
      row("read-warm", ours_r, raw_r);
      row("read-cold", ours_c, raw_c);
      std::filesystem::remove_all(dir);
    }
  }
  MPI_Finalize();
  return 0;
}
