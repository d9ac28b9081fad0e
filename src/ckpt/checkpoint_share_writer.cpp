// Parallel-HDF5 writing of arrays that no rank holds whole (ZeRO's optimizer state): each rank writes
// its share as a hyperslab selection of the full array, and the ranks complete the checksum blocks
// that span their shares by passing each other the fragments.
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "checkpoint_h5.hpp"
#include "checkpoint_writer_impl.hpp"
#include "mnddp/check.hpp"
#include "mnddp/ckpt/array_checksum.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

using namespace ckpt_detail;

namespace {

constexpr int kFragmentTag = 19019;  // point-to-point on the writers' communicator
constexpr auto kBlock = static_cast<std::int64_t>(kChecksumBlockBytes);

// Every rank's byte range of one array, and who hashes which checksum block: block k is hashed by
// the rank whose share holds its first byte, so rank r hashes blocks [ceil(a/B), ceil(b/B)).
class ShareMap {
 public:
  ShareMap(std::vector<std::int64_t> ranges, std::int64_t total) : ranges_(std::move(ranges)), total_(total) {
    order_.resize(ranges_.size() / 2);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) { return begin(x) < begin(y); });
    std::int64_t covered = 0;
    for (int r : order_) {
      if (end(r) == begin(r)) continue;
      if (begin(r) != covered) throw std::logic_error("checkpoint shares overlap or leave a gap (internal error)");
      covered = end(r);
    }
    if (covered != total_) throw std::logic_error("checkpoint shares do not cover the array (internal error)");
  }

  std::int64_t begin(int rank) const { return ranges_[2 * static_cast<std::size_t>(rank)]; }
  std::int64_t end(int rank) const { return ranges_[2 * static_cast<std::size_t>(rank) + 1]; }
  int ranks() const { return static_cast<int>(order_.size()); }

  // The first and one-past-last block `rank` hashes.
  std::pair<std::int64_t, std::int64_t> blocks(int rank) const {
    if (end(rank) == begin(rank)) return {0, 0};
    return {(begin(rank) + kBlock - 1) / kBlock, (end(rank) + kBlock - 1) / kBlock};
  }
  // The rank whose share holds `byte`.
  int holder(std::int64_t byte) const {
    for (int r : order_)
      if (begin(r) <= byte && byte < end(r)) return r;
    throw std::logic_error("checkpoint share map: no rank holds a byte (internal error)");
  }
  // Ranks in the order of their shares, empty ones left out.
  std::vector<int> in_order() const {
    std::vector<int> out;
    for (int r : order_)
      if (end(r) > begin(r)) out.push_back(r);
    return out;
  }
  std::int64_t total() const { return total_; }

 private:
  std::vector<std::int64_t> ranges_;
  std::int64_t total_;
  std::vector<int> order_;
};

}  // namespace

void ParallelCheckpointWriter::write_share(const ArrayShare& share) {
  const auto element = static_cast<std::int64_t>(dtype_size(share.dtype));
  // The write and the exchange of the blocks that span shares (point to point: MPI_Waitall).
  std::optional<CollectiveScope> phase =
      impl_->phase("h5 write share", static_cast<std::size_t>(share.count * element));
  std::int64_t mine[2] = {share.first * element, (share.first + share.count) * element};
  std::vector<std::int64_t> ranges(2 * static_cast<std::size_t>(impl_->size));
  impl_->comm->allgather(mine, ranges.data(), 2, DType::I64);
  const ShareMap map(std::move(ranges), product(share.shape) * element);
  const int me = impl_->rank;
  const std::int64_t a = map.begin(me), b = map.end(me);
  const auto* bytes = static_cast<const unsigned char*>(share.data);

  // The head of this share completes a block another rank starts; the tail of this share's last
  // block comes from the ranks after it.
  std::vector<MPI_Request> requests;
  if (b > a && a % kBlock != 0) {
    const std::int64_t head_end = std::min(b, (a / kBlock + 1) * kBlock);
    requests.emplace_back();
    MNDDP_MPI_CHECK(MPI_Isend(bytes, static_cast<int>(head_end - a), MPI_BYTE, map.holder(a / kBlock * kBlock),
                              kFragmentTag, impl_->mpi, &requests.back()));
  }
  std::vector<unsigned char> last_block;
  std::int64_t last_start = -1;
  if (b > a && (b - 1) / kBlock * kBlock >= a) {
    last_start = (b - 1) / kBlock * kBlock;
    const std::int64_t last_end = std::min(map.total(), last_start + kBlock);
    last_block.resize(static_cast<std::size_t>(last_end - last_start));
    std::copy(bytes + (last_start - a), bytes + (b - a), last_block.begin());
    for (int q : map.in_order()) {
      if (map.begin(q) < b || map.begin(q) >= last_end) continue;
      requests.emplace_back();
      MNDDP_MPI_CHECK(MPI_Irecv(last_block.data() + (map.begin(q) - last_start),
                                static_cast<int>(std::min(map.end(q), last_end) - map.begin(q)), MPI_BYTE, q,
                                kFragmentTag, impl_->mpi, &requests.back()));
    }
  }
  const std::optional<Failure> failure = capture_failure([&] { write_share_data(share); });
  MNDDP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  phase.reset();

  std::vector<std::uint64_t> hashes;
  const auto [first_block, end_block] = map.blocks(me);
  for (std::int64_t k = first_block; k < end_block; ++k) {
    const std::int64_t start = k * kBlock;
    if (start == last_start) {
      hashes.push_back(block_hash(last_block.data(), last_block.size()));
    } else {
      hashes.push_back(block_hash(bytes + (start - a), static_cast<std::size_t>(kBlock)));
    }
  }
  // Hashes travel in rank order; the checksum needs them in block order (the ranks' share order).
  std::vector<std::size_t> per_rank(static_cast<std::size_t>(impl_->size), 0);
  for (int r = 0; r < impl_->size; ++r) {
    const auto [from, to] = map.blocks(r);
    per_rank[static_cast<std::size_t>(r)] = static_cast<std::size_t>(to - from);
  }
  finish_array(share.path, share.dtype, failure, hashes, per_rank, map.in_order());
}

void ParallelCheckpointWriter::write_share_data(const ArrayShare& share) {
  std::lock_guard lock(hdf5_mutex());
  H5Handle file_space;
  H5Handle dataset = impl_->create(share.path, share.dtype, share.shape, file_space);
  const hsize_t elements = std::max<hsize_t>(1, static_cast<hsize_t>(share.count));
  H5Handle memory_space(H5Screate_simple(1, &elements, nullptr));
  if (share.count == 0) MNDDP_H5_CHECK(H5Sselect_none(memory_space.get()));
  select_flat_range(file_space.get(), share.shape, share.first, share.count);
  const herr_t written = H5Dwrite(dataset.get(), memory_type(share.dtype), memory_space.get(), file_space.get(),
                                  impl_->transfer.get(), share.data);
  if (written < 0) impl_->write_failed(share.path, static_cast<std::size_t>(share.count) * dtype_size(share.dtype));
}

}  // namespace mnddp
