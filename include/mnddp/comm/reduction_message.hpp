// Several reductions in one all-reduce: sums of doubles, the minimum and maximum of 64-bit words,
// and the largest double with the rank that holds it. A log interval's metrics travel this way
// together with the consistency checks' hashes and the straggler figures, so whatever rides on the
// interval costs no collective of its own. Every rank adds the same fields in the same order. A rank
// whose layout differs in a message of the same size (a program out of step) makes the result say so
// (layout_agreed() is false) instead of mixing unrelated fields; a message of another size is an
// error MPI itself reports (a truncation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mnddp {

class ReductionMessage {
 public:
  using Slot = std::size_t;

  Slot add_sum(double value);
  Slot add_min_max(std::uint64_t value);
  Slot add_max_rank(double value, int rank);  // ties go to the lowest rank

  // After the all-reduce (before it: this rank's own values).
  double sum(Slot slot) const { return sums_[slot]; }
  std::uint64_t min(Slot slot) const { return mins_[slot]; }
  std::uint64_t max(Slot slot) const { return maxes_[slot]; }
  double max_value(Slot slot) const { return max_values_[slot]; }
  int max_rank(Slot slot) const { return static_cast<int>(max_ranks_[slot]); }
  bool layout_agreed() const { return layout_agreed_; }

  // The wire form (one MPI element), and back. Used by MpiComm::allreduce(ReductionMessage&).
  std::vector<unsigned char> encode() const;
  void decode(const std::vector<unsigned char>& wire);
  // The MPI user function that combines two wire forms (MPI_User_function's shape).
  static void combine(void* in, void* inout, int* len, void* datatype);

 private:
  std::vector<double> sums_;
  std::vector<std::uint64_t> mins_;
  std::vector<std::uint64_t> maxes_;
  std::vector<double> max_values_;
  std::vector<std::int64_t> max_ranks_;
  bool layout_agreed_ = true;
};

}  // namespace mnddp
