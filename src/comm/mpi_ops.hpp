// Internal: MPI datatypes and reduction ops for our DTypes, including fp16/bf16 (MPI has no
// half-precision arithmetic: user-defined ops accumulate each pair in float).
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>

#include "mnddp/comm/communicator.hpp"

namespace mnddp::mpi_detail {

// MPI counts are int: large buffers are walked in chunks of at most this many elements.
inline constexpr std::size_t kMaxChunk = static_cast<std::size_t>(INT_MAX) / 2;

MPI_Op reduce_op(ReduceOp op, DType dtype);      // Avg maps to the Sum op; divide afterwards
void check_reducible(DType dtype, ReduceOp op);  // throws std::invalid_argument (avg of integers)
void divide_in_place(void* buffer, std::size_t count, DType dtype, int divisor);

}  // namespace mnddp::mpi_detail
