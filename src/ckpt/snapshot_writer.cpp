// A snapshot into checkpoint files: whole (a checkpoint of --checkpoint-dir, or of the node-local
// level at --zero 0), or in the node-local level's two parts at --zero 1|2 (the base, and each
// rank's own shares: ckpt/local_files.hpp).
#include <ATen/ATen.h>

#include "mnddp/ckpt/share_index.hpp"
#include "mnddp/ckpt/training_state.hpp"
#include "mnddp/comm/tensor_comm.hpp"

namespace mnddp {
namespace {

ArrayView view_of(const std::string& path, const at::Tensor& host) {
  ArrayView view;
  view.path = path;
  view.dtype = to_comm_dtype(host.scalar_type());
  view.shape.assign(host.sizes().begin(), host.sizes().end());
  view.data = host.data_ptr();
  return view;
}

}  // namespace

void write_snapshot_base(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot) {
  for (const auto& [path, host] : snapshot.arrays) writer.write(view_of(path, host));
  for (const auto& [name, value] : snapshot.attributes) writer.set_attribute(name, value);
}

void write_snapshot(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot) {
  for (const auto& [path, host] : snapshot.arrays) writer.write(view_of(path, host));
  for (const auto& share : snapshot.shares) {
    ArrayShare part;
    part.path = share.path;
    part.dtype = to_comm_dtype(share.values.scalar_type());
    part.shape = share.shape;
    part.first = share.first;
    part.count = share.values.numel();
    part.data = share.values.data_ptr();
    writer.write_share(part);
  }
  for (const auto& [name, value] : snapshot.attributes) writer.set_attribute(name, value);
}

void write_snapshot_own_shares(ParallelCheckpointWriter& writer, const StateSnapshot& snapshot) {
  std::vector<ShareIndexEntry> index;
  for (const auto& share : snapshot.shares) {
    writer.write(view_of(share.path, share.values.reshape({share.values.numel()})));
    index.push_back({share.path, share.shape, share.first, share.values.numel()});
  }
  writer.set_attribute(kShareIndexAttribute, share_index_to_json(index));
  for (const auto& [name, value] : snapshot.attributes) writer.set_attribute(name, value);
}

std::uint64_t StateSnapshot::bytes() const {
  std::uint64_t total = 0;
  for (const auto& array : arrays) total += array.tensor.nbytes();
  // A share's array is written whole (by every rank together): its size is the file's.
  for (const auto& share : shares) {
    std::int64_t values = 1;
    for (auto d : share.shape) values *= d;
    total += static_cast<std::uint64_t>(values) * share.values.element_size();
  }
  return total;
}

}  // namespace mnddp
