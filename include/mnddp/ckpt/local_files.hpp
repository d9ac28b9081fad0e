// The node-local checkpoint level's files (--local-checkpoint-dir): their names, and what one node
// holds. Each node keeps its own directory at the same path (/dev/shm/..., a local disk):
//   step-00000120.h5                 a whole checkpoint (--zero 0: every node writes one), the same
//                                    format as --checkpoint-dir's, readable by every resume path
//   step-00000120.base.h5            --zero 1|2: everything but the optimizer state's shares
//   step-00000120.share-000003-of-000004.h5
//                                    --zero 1|2: rank 3's shares (of a 4-rank run), on rank 3's node
//                                    and, as its partner copy, on the next node
//   run                              the --checkpoint-dir this level belongs to (one line)
//   <name>.<random>.tmp              a write in progress (or left by a dead one)
// Torch-free and MPI-free: names and directory listings only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mnddp {

struct LocalFile {
  enum class Kind { Whole, Base, Share };
  std::int64_t step = 0;
  Kind kind = Kind::Whole;
  int share = 0;     // Kind::Share: the writing rank
  int of = 0;        // Kind::Share: that run's world size
  std::string name;  // the file name, as local_file_name() makes it

  bool operator==(const LocalFile&) const = default;
};

std::string local_file_name(std::int64_t step, LocalFile::Kind kind, int share = 0, int of = 0);
LocalFile local_file(std::int64_t step, LocalFile::Kind kind, int share = 0, int of = 0);

// The committed local file `name` denotes, or nullopt for any other name (temporaries included).
std::optional<LocalFile> parse_local_file_name(const std::string& name);

// The committed local files in `directory`, by name; none when it does not exist.
std::vector<LocalFile> list_local_files(const std::string& directory);

// The marker that ties a local directory to its run's --checkpoint-dir.
inline constexpr const char* kLocalRunMarker = "run";

// Whether `name` is a temporary the local level made ("<local file name>.<random>.tmp", or the run
// marker's), so that the start-up sweep takes nothing else.
bool is_local_temporary(const std::string& name);

}  // namespace mnddp
