// CheckpointManager: the checkpoint directory. Saves atomically (write a unique, exclusively created
// step-N.h5.<random>.tmp collectively, agree that every rank succeeded, rename, fsync the directory,
// then replace `latest` the same way), keeps the newest keep_last, removes its own temporaries that
// a dead run left at start, and picks the
// checkpoint to resume from, verifying checksums and falling back to an older one if needed.
// It holds the directory and its rules, not a communicator: each collective call names the one it
// runs on, so one manager serves training's communicator and the asynchronous writer's alike.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/resume_from.hpp"
#include "mnddp/comm/mpi_comm.hpp"

namespace mnddp {

class CheckpointManager {
 public:
  // Collective over `comm`. Root creates the directory and removes mnddp's temporaries that are
  // older than this process (writes a crashed run left); no other file is touched.
  CheckpointManager(std::string directory, int keep_last, Communicator& comm);

  // Collective over `comm`, whose MPI communicator opens the parallel-HDF5 file. `write` fills the
  // file (every rank calls it with the same state). Returns the committed path. Throws (on every
  // rank) if any rank failed; the previous checkpoints and `latest` are untouched then.
  // `expected_bytes` (the arrays' size) is checked against the free space first, so a full disk is
  // found before any rank starts writing, not by one rank in the middle of a collective write.
  std::string save(std::int64_t step, std::uint64_t expected_bytes,
                   const std::function<void(ParallelCheckpointWriter&)>& write, MpiComm& comm);

  // Collective. For --resume: "none" gives ""; "auto" the newest checkpoint in `directory` that
  // verifies (warning about each one skipped), or "" if there is none (or no directory); a path must
  // verify or it is an error.
  static std::string resolve_resume(Communicator& comm, const std::string& directory, const ResumeFrom& resume);
  // Collective, once a resume from the checkpoint of `step` goes ahead (so that a refused one
  // touches nothing): the checkpoints in `directory` after it, the future of an abandoned run, are
  // renamed *.abandoned with a warning, and `latest` names the newest that remains.
  static void set_aside_newer(Communicator& comm, const std::string& directory, std::int64_t step);

  // Root only, after `committed` is committed: keeps it as best.h5 (a hard link, so the keep-last
  // rotation cannot remove it; a copy where the file system has none), with best.json naming the
  // metric, its value and the step. Both are replaced durably (write, rename, fsync). Returns
  // best.h5's path.
  std::string keep_as_best(const std::string& committed, const std::string& metric, double value,
                           std::int64_t step) const;
  // The best.json of `directory` when it records `metric`: its value and step.
  struct Best {
    double value = 0.0;
    std::int64_t step = 0;
  };
  static std::optional<Best> read_best(const std::string& directory, const std::string& metric);
  static constexpr const char* kBestFile = "best.h5";

  const std::string& directory() const { return directory_; }
  // Committed checkpoints, oldest first (root's view of the directory).
  std::vector<std::string> committed() const;
  static std::vector<std::string> committed_in(const std::string& directory);
  static std::string file_name(std::int64_t step);  // "step-00000123.h5"

 private:
  std::string directory_;
  int keep_last_;
};

}  // namespace mnddp
