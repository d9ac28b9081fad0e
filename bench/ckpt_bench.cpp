// Checkpoint I/O benchmark (results in docs/BENCHMARKS.md): writing a state of --mb megabytes with
// the parallel-HDF5 writer (every rank writes its row range, then fsync and atomic rename, as the
// trainer commits) against a raw sequential write of the same bytes with fsync by one rank; and
// reading it back (CheckpointReader, checksums verified) against a raw sequential read. Alternating,
// medians. Usage: mpirun -np N mnddp-bench-ckpt DIR [mb] [reps]
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/comm/mpi_comm.hpp"

using namespace mnddp;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
    if (world.is_root()) std::filesystem::create_directories(dir);
    world.barrier();

    // A model-like state: 16 tensors of equal size (rows of 1024 floats).
    const std::size_t tensors = 16;
    const std::size_t rows = megabytes * (1u << 20) / sizeof(float) / 1024 / tensors;
    std::vector<float> state(tensors * rows * 1024);
    for (std::size_t i = 0; i < state.size(); ++i) state[i] = static_cast<float>(i % 9973) * 0.5f;
    const double bytes = static_cast<double>(state.size() * sizeof(float));
    CheckpointManager manager(dir + "/ckpt", 1, world, world.handle());

    std::vector<double> ours_w, raw_w, ours_r, raw_r;
    std::vector<char> buffer(64u << 20);
    for (int rep = 0; rep < reps; ++rep) {
      world.barrier();
      auto t = Clock::now();
      const std::string path =
          manager.save(rep, static_cast<std::uint64_t>(bytes), [&](ParallelCheckpointWriter& writer) {
            for (std::size_t k = 0; k < tensors; ++k)
              writer.write({"model/t" + std::to_string(k),
                            DType::F32,
                            {static_cast<std::int64_t>(rows), 1024},
                            state.data() + k * rows * 1024});
          });
      world.barrier();
      ours_w.push_back(since(t));

      t = Clock::now();
      if (world.is_root()) raw_write(dir + "/raw.bin", state);
      world.barrier();
      raw_w.push_back(since(t));

      if (world.is_root()) {
        t = Clock::now();
        CheckpointReader(path).verify_all();
        ours_r.push_back(since(t));
        t = Clock::now();
        raw_read(dir + "/raw.bin", buffer);
        raw_r.push_back(since(t));
      }
    }
    if (world.is_root()) {
      const double mb = bytes / 1e6;
      std::printf("%5d %10.0f %12.0f %12.0f %8.2f %12.0f %12.0f %8.2f\n", world.size(), mb, mb / median(ours_w),
                  mb / median(raw_w), median(raw_w) / median(ours_w), mb / median(ours_r), mb / median(raw_r),
                  median(raw_r) / median(ours_r));
      std::filesystem::remove_all(dir);
    }
  }
  MPI_Finalize();
  return 0;
}
