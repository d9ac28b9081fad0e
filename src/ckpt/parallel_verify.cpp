// Every rank hashes its share of every array's checksum blocks; one all-gather, then each rank checks
// every array (the same bytes, the same verdict everywhere).
#include "mnddp/ckpt/parallel_verify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"

namespace mnddp {
namespace {

std::size_t share_of(std::size_t blocks, int rank, int size) {
  const auto [first, last] =
      checksum_blocks_share(blocks, static_cast<std::size_t>(rank), static_cast<std::size_t>(size));
  return last - first;
}

}  // namespace

CheckpointVerdict verify_checkpoint_in_parallel(Communicator& comm, const std::string& path) {
  CheckpointVerdict verdict;
  std::vector<std::string> names;
  std::vector<CheckpointReader::BlockHashes> arrays;
  std::vector<std::uint64_t> mine;
  bool whole_on_root = false;
  try {
    CheckpointReader reader(path);
    if (!reader.has_attribute("format_version") || !reader.has_attribute("step"))
      throw CorruptCheckpoint(fmt::format("'{}' is not an mnddp checkpoint (no format_version/step)", path));
    try {
      verdict.step = std::stoll(reader.attribute("step"));
    } catch (const std::logic_error&) {
      throw CorruptCheckpoint(fmt::format("'{}': its step attribute is not a number", path));
    }
    whole_on_root = reader.attribute("format_version") == "1";
    if (whole_on_root) {
      if (comm.is_root()) reader.verify_all();
    } else {
      names = reader.datasets();
      for (const auto& name : names) {
        arrays.push_back(
            reader.hash_blocks(name, static_cast<std::size_t>(comm.rank()), static_cast<std::size_t>(comm.size())));
        mine.insert(mine.end(), arrays.back().mine.begin(), arrays.back().mine.end());
      }
    }
  } catch (const CorruptCheckpoint& e) {
    verdict.kind = CheckpointVerdict::Kind::Corrupt;
    verdict.message = e.what();
  } catch (const std::exception& e) {
    verdict.kind = CheckpointVerdict::Kind::Unreadable;
    verdict.message = e.what();
  }
  // The worst outcome anywhere wins (a rank that could not read has no hashes to give), with the
  // message of the lowest rank that saw it.
  const auto worst = static_cast<CheckpointVerdict::Kind>(allreduce_max(comm, static_cast<std::int64_t>(verdict.kind)));
  if (worst != CheckpointVerdict::Kind::Good) {
    const auto messages = allgather_strings(comm, verdict.kind == worst ? verdict.message : std::string());
    const auto first = std::find_if(messages.begin(), messages.end(), [](const auto& m) { return !m.empty(); });
    return {worst, first != messages.end() ? *first : std::string(), 0};
  }
  if (whole_on_root) return verdict;

  // Every rank knows every array's block count, so where each rank's hashes of each array sit.
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (const auto& array : arrays)
    for (int r = 0; r < comm.size(); ++r) counts[static_cast<std::size_t>(r)] += share_of(array.blocks, r, comm.size());
  const std::size_t slot = std::max<std::size_t>(1, *std::max_element(counts.begin(), counts.end()));
  mine.resize(slot, 0);
  std::vector<std::uint64_t> all(slot * static_cast<std::size_t>(comm.size()));
  comm.allgather(mine.data(), all.data(), slot, DType::I64);
  std::vector<std::size_t> cursor(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t j = 0; j < arrays.size(); ++j) {
    std::vector<std::uint64_t> hashes;
    for (int r = 0; r < comm.size(); ++r) {
      const std::size_t n = share_of(arrays[j].blocks, r, comm.size());
      const std::uint64_t* theirs =
          all.data() + static_cast<std::size_t>(r) * slot + cursor[static_cast<std::size_t>(r)];
      hashes.insert(hashes.end(), theirs, theirs + n);
      cursor[static_cast<std::size_t>(r)] += n;
    }
    const std::uint64_t actual = checksum_of_blocks(hashes);
    if (actual != arrays[j].stored)
      return {CheckpointVerdict::Kind::Corrupt,
              fmt::format("checkpoint '{}': array '{}' is corrupt (XXH3-64 {:016x}, expected {:016x})", path, names[j],
                          actual, arrays[j].stored),
              0};
  }
  return verdict;
}

}  // namespace mnddp
