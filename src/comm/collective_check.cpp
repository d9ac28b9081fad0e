// The desync check: an all-gather of call descriptors, compared against rank 0's.
#include "mnddp/comm/collective_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "mnddp/check.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::atomic<bool> g_debug{false};

// Fixed-size, so it travels as bytes; the label is cut to fit.
struct Descriptor {
  std::uint64_t seq;
  std::uint64_t hash;  // of every earlier call on this channel
  std::int64_t count;
  std::int32_t dtype;
  std::int32_t root;
  char op[16];
  char label[48];
};

void copy_text(char* to, std::size_t size, const std::string& from) {
  std::memset(to, 0, size);
  std::memcpy(to, from.data(), std::min(size - 1, from.size()));
}

std::uint64_t fnv1a(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

std::string describe(const Descriptor& d) {
  std::string text = fmt::format("{} {} x {}", d.op, dtype_name(static_cast<DType>(d.dtype)), d.count);
  if (d.root >= 0) text += fmt::format(" from root {}", d.root);
  if (d.label[0] != '\0') text += fmt::format(" ({})", d.label);
  return text;
}

}  // namespace

void set_debug_collectives(bool on) { g_debug.store(on); }
bool debug_collectives() { return g_debug.load(std::memory_order_relaxed); }

void CollectiveCheck::verify(MPI_Comm comm, std::uint64_t seq, const char* op, DType dtype, std::size_t count, int root,
                             const std::string& label) {
  int size = 1;
  MNDDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  Descriptor mine{};
  mine.seq = seq;
  mine.hash = hash;
  mine.count = static_cast<std::int64_t>(count);
  mine.dtype = static_cast<std::int32_t>(dtype);
  mine.root = root;
  copy_text(mine.op, sizeof(mine.op), op);
  copy_text(mine.label, sizeof(mine.label), label);
  std::vector<Descriptor> all(static_cast<std::size_t>(size));
  MNDDP_MPI_CHECK(MPI_Allgather(&mine, sizeof(Descriptor), MPI_BYTE, all.data(), sizeof(Descriptor), MPI_BYTE, comm));
  // What must agree: the call, where the program issued it (its label), and everything before it.
  std::vector<int> differing;
  for (int r = 1; r < size; ++r) {
    const Descriptor& a = all[0];
    const Descriptor& b = all[static_cast<std::size_t>(r)];
    if (a.hash != b.hash || a.count != b.count || a.dtype != b.dtype || a.root != b.root ||
        std::strncmp(a.op, b.op, sizeof(a.op)) != 0 || std::strncmp(a.label, b.label, sizeof(a.label)) != 0)
      differing.push_back(r);
  }
  if (!differing.empty()) {
    const Descriptor& first = all[static_cast<std::size_t>(differing.front())];
    const bool earlier = first.hash != all[0].hash;
    throw Error(fmt::format("collectives out of step on the {} channel at call #{}: rank 0 calls {} but rank {} calls "
                            "{}{}; differing ranks: {} (--debug-collectives)",
                            channel, seq, describe(all[0]), differing.front(), describe(first),
                            earlier ? " (and an earlier call already differed)" : "", fmt::join(differing, ", ")),
                kExitDesync, /*collective=*/true);
  }
  hash = fnv1a(hash, &mine.count, sizeof(mine.count));
  hash = fnv1a(hash, &mine.dtype, sizeof(mine.dtype));
  hash = fnv1a(hash, &mine.root, sizeof(mine.root));
  hash = fnv1a(hash, mine.op, std::strlen(mine.op));
  hash = fnv1a(hash, mine.label, std::strlen(mine.label));
}

}  // namespace mnddp
