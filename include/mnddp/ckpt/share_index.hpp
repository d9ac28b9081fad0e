// Where a rank's optimizer-state shares belong in their whole arrays, for the node-local level's
// share files (ckpt/local_files.hpp): each share is stored as a one-dimensional array of its values
// under the whole array's path, and the file's `shares` attribute (JSON) says, per path, the whole
// array's shape and the first element the share covers. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

struct ShareIndexEntry {
  std::string path;                 // "optimizer/fc.weight/exp_avg"
  std::vector<std::int64_t> shape;  // of the whole array
  std::int64_t first = 0;           // element offset in C order
  std::int64_t count = 0;           // elements in this share (possibly 0)

  bool operator==(const ShareIndexEntry&) const = default;
};

inline constexpr const char* kShareIndexAttribute = "shares";

std::string share_index_to_json(const std::vector<ShareIndexEntry>& entries);
// Throws CorruptCheckpoint naming `where` for anything but what share_index_to_json writes (a
// share outside its array, a negative count, a shape whose size overflows).
std::vector<ShareIndexEntry> share_index_from_json(const std::string& text, const std::string& where);

}  // namespace mnddp
