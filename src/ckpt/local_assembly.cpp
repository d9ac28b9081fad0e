// Base + shares -> one whole checkpoint file, array by array.
#include "mnddp/ckpt/local_assembly.hpp"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/local_files.hpp"
#include "mnddp/ckpt/share_index.hpp"
#include "mnddp/default_init_allocator.hpp"

namespace fs = std::filesystem;

namespace mnddp {

void assemble_local_checkpoint(const std::string& directory, std::int64_t step, int shares, MpiComm& self,
                               const std::string& out_path) {
  using Kind = LocalFile::Kind;
  const auto in_directory = [&](const std::string& name) { return (fs::path(directory) / name).string(); };
  const CheckpointReader base(in_directory(local_file_name(step, Kind::Base)));
  std::vector<std::unique_ptr<CheckpointReader>> parts;
  std::vector<std::vector<ShareIndexEntry>> indexes;
  for (int r = 0; r < shares; ++r) {
    parts.push_back(std::make_unique<CheckpointReader>(in_directory(local_file_name(step, Kind::Share, r, shares))));
    indexes.push_back(share_index_from_json(parts.back()->attribute(kShareIndexAttribute), parts.back()->path()));
    if (parts.back()->attribute("step") != base.attribute("step"))
      throw CorruptCheckpoint(fmt::format("share file '{}' is of step {}, its base '{}' of step {}",
                                          parts.back()->path(), parts.back()->attribute("step"), base.path(),
                                          base.attribute("step")));
  }

  ParallelCheckpointWriter writer(self, self.handle(), out_path, ParallelCheckpointWriter::Create::Exclusive);
  for (const auto& name : base.datasets()) {
    const ArrayData array = base.read(name);
    writer.write({name, array.dtype, array.shape, array.bytes.data()});
  }
  // Each share path once, in rank 0's order; every rank's file places its part of it.
  for (std::size_t i = 0; shares > 0 && i < indexes[0].size(); ++i) {
    const ShareIndexEntry& first = indexes[0][i];
    std::int64_t elements = 1;
    for (const auto d : first.shape) elements *= d;
    std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>> whole;
    std::map<std::int64_t, std::int64_t> ranges;  // first -> count
    DType dtype = DType::F32;
    std::size_t element_size = 0;
    for (int r = 0; r < shares; ++r) {
      const ShareIndexEntry* entry = nullptr;
      for (const auto& e : indexes[static_cast<std::size_t>(r)])
        if (e.path == first.path) entry = &e;
      if (entry == nullptr || entry->shape != first.shape)
        throw CorruptCheckpoint(fmt::format("share file '{}' has no share of '{}' in its shape",
                                            parts[static_cast<std::size_t>(r)]->path(), first.path));
      const ArrayData part = parts[static_cast<std::size_t>(r)]->read(first.path);
      if (part.numel() != entry->count)
        throw CorruptCheckpoint(fmt::format("share file '{}': '{}' holds {} values, its index says {}",
                                            parts[static_cast<std::size_t>(r)]->path(), first.path, part.numel(),
                                            entry->count));
      if (r == 0) {
        dtype = part.dtype;
        element_size = dtype_size(dtype);
        whole.resize(static_cast<std::size_t>(elements) * element_size);
      } else if (part.dtype != dtype) {
        throw CorruptCheckpoint(fmt::format("share files disagree on the type of '{}'", first.path));
      }
      if (entry->count > 0) {
        ranges[entry->first] = entry->count;
        std::memcpy(whole.data() + static_cast<std::size_t>(entry->first) * element_size, part.bytes.data(),
                    part.bytes.size());
      }
    }
    // The shares must cover the array exactly once: sorted by their first element, each begins
    // where the one before ends, and the last ends at the array's end.
    std::int64_t next = 0;
    for (const auto& [begin, count] : ranges) {
      if (begin != next)
        throw CorruptCheckpoint(
            fmt::format("the shares of '{}' leave a gap or overlap at element {}", first.path, std::min(begin, next)));
      next = begin + count;
    }
    if (next != elements)
      throw CorruptCheckpoint(
          fmt::format("the shares of '{}' cover {} of its {} elements", first.path, next, elements));
    writer.write({first.path, dtype, first.shape, whole.data()});
  }
  for (const auto& name : base.attribute_names()) writer.set_attribute(name, base.attribute(name));
  writer.close();
}

}  // namespace mnddp
