// ReductionMessage: the wire form is a header (the field counts and a flag) and the fields' arrays,
// one MPI element of a contiguous byte type, so MPI never splits it between calls of the op.
#include "mnddp/comm/reduction_message.hpp"

#include <algorithm>
#include <cstring>

namespace mnddp {
namespace {

struct Header {
  std::uint32_t sums;
  std::uint32_t min_maxes;
  std::uint32_t max_ranks;
  std::uint32_t layout_differs;  // set by combine() when two contributions' headers differ
};

std::size_t wire_bytes(const Header& h) {
  return sizeof(Header) + h.sums * sizeof(double) + h.min_maxes * 2 * sizeof(std::uint64_t) +
         h.max_ranks * (sizeof(double) + sizeof(std::int64_t));
}

// Typed views of one wire form's arrays.
struct Fields {
  double* sums;
  std::uint64_t* mins;
  std::uint64_t* maxes;
  double* max_values;
  std::int64_t* max_ranks;
};

Fields fields_of(unsigned char* wire, const Header& h) {
  unsigned char* p = wire + sizeof(Header);
  Fields f{};
  f.sums = reinterpret_cast<double*>(p);
  p += h.sums * sizeof(double);
  f.mins = reinterpret_cast<std::uint64_t*>(p);
  p += h.min_maxes * sizeof(std::uint64_t);
  f.maxes = reinterpret_cast<std::uint64_t*>(p);
  p += h.min_maxes * sizeof(std::uint64_t);
  f.max_values = reinterpret_cast<double*>(p);
  p += h.max_ranks * sizeof(double);
  f.max_ranks = reinterpret_cast<std::int64_t*>(p);
  return f;
}

}  // namespace

ReductionMessage::Slot ReductionMessage::add_sum(double value) {
  sums_.push_back(value);
  return sums_.size() - 1;
}

ReductionMessage::Slot ReductionMessage::add_min_max(std::uint64_t value) {
  mins_.push_back(value);
  maxes_.push_back(value);
  return mins_.size() - 1;
}

ReductionMessage::Slot ReductionMessage::add_max_rank(double value, int rank) {
  max_values_.push_back(value);
  max_ranks_.push_back(rank);
  return max_values_.size() - 1;
}

std::vector<unsigned char> ReductionMessage::encode() const {
  const Header h{static_cast<std::uint32_t>(sums_.size()), static_cast<std::uint32_t>(mins_.size()),
                 static_cast<std::uint32_t>(max_values_.size()), 0};
  std::vector<unsigned char> wire(wire_bytes(h));
  std::memcpy(wire.data(), &h, sizeof(h));
  const Fields f = fields_of(wire.data(), h);
  std::copy(sums_.begin(), sums_.end(), f.sums);
  std::copy(mins_.begin(), mins_.end(), f.mins);
  std::copy(maxes_.begin(), maxes_.end(), f.maxes);
  std::copy(max_values_.begin(), max_values_.end(), f.max_values);
  std::copy(max_ranks_.begin(), max_ranks_.end(), f.max_ranks);
  return wire;
}

void ReductionMessage::decode(const std::vector<unsigned char>& wire) {
  Header h{};
  std::memcpy(&h, wire.data(), sizeof(h));
  layout_agreed_ = h.layout_differs == 0 && h.sums == sums_.size() && h.min_maxes == mins_.size() &&
                   h.max_ranks == max_values_.size();
  if (!layout_agreed_) return;             // this rank's own values stay
  std::vector<unsigned char> copy = wire;  // fields_of needs a mutable pointer
  const Fields f = fields_of(copy.data(), h);
  std::copy(f.sums, f.sums + h.sums, sums_.begin());
  std::copy(f.mins, f.mins + h.min_maxes, mins_.begin());
  std::copy(f.maxes, f.maxes + h.min_maxes, maxes_.begin());
  std::copy(f.max_values, f.max_values + h.max_ranks, max_values_.begin());
  std::copy(f.max_ranks, f.max_ranks + h.max_ranks, max_ranks_.begin());
}

void ReductionMessage::combine(void* in, void* inout, int* len, void* /*datatype*/) {
  // Each element is one whole message (the datatype spans it): *len is 1 in practice.
  auto* a = static_cast<unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int e = 0; e < *len; ++e) {
    Header ha{}, hb{};
    std::memcpy(&ha, a, sizeof(ha));
    std::memcpy(&hb, b, sizeof(hb));
    const std::size_t size = wire_bytes(hb);
    if (ha.sums != hb.sums || ha.min_maxes != hb.min_maxes || ha.max_ranks != hb.max_ranks || ha.layout_differs != 0 ||
        hb.layout_differs != 0) {
      hb.layout_differs = 1;
      std::memcpy(b, &hb, sizeof(hb));
    } else {
      const Fields fa = fields_of(a, ha);
      const Fields fb = fields_of(b, hb);
      for (std::uint32_t i = 0; i < hb.sums; ++i) fb.sums[i] += fa.sums[i];
      for (std::uint32_t i = 0; i < hb.min_maxes; ++i) {
        fb.mins[i] = std::min(fb.mins[i], fa.mins[i]);
        fb.maxes[i] = std::max(fb.maxes[i], fa.maxes[i]);
      }
      for (std::uint32_t i = 0; i < hb.max_ranks; ++i) {
        const bool larger = fa.max_values[i] > fb.max_values[i] ||
                            (fa.max_values[i] == fb.max_values[i] && fa.max_ranks[i] < fb.max_ranks[i]);
        if (larger) {
          fb.max_values[i] = fa.max_values[i];
          fb.max_ranks[i] = fa.max_ranks[i];
        }
      }
    }
    a += size;
    b += size;
  }
}

}  // namespace mnddp
