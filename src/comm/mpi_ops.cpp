// MPI reduction ops for every DType, with fp16/bf16 done in float.
#include "mpi_ops.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "mnddp/check.hpp"

namespace mnddp::mpi_detail {
namespace {

// --- IEEE half and bfloat16 <-> float (round to nearest even) --------------------------------
float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}
float f16_to_float(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
std::uint16_t float_to_f16(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float), int Kind>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]);
    const float y = ToFloat(b[i]);
    const float r = Kind == 0 ? x + y : (Kind == 1 ? std::max(x, y) : std::min(x, y));
    b[i] = FromFloat(r);
  }
}

struct HalfOps {
  MPI_Op ops[2][3];  // [f16, bf16][sum, max, min]
};

// Created on first use, after MPI_Init; MPI frees user ops at MPI_Finalize.
const HalfOps& half_ops() {
  static const HalfOps ops = [] {
    HalfOps h{};
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<f16_to_float, float_to_f16, 0>, 1, &h.ops[0][0]));
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<f16_to_float, float_to_f16, 1>, 1, &h.ops[0][1]));
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<f16_to_float, float_to_f16, 2>, 1, &h.ops[0][2]));
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<bf16_to_float, float_to_bf16, 0>, 1, &h.ops[1][0]));
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<bf16_to_float, float_to_bf16, 1>, 1, &h.ops[1][1]));
    MNDDP_MPI_CHECK(MPI_Op_create(&half_op<bf16_to_float, float_to_bf16, 2>, 1, &h.ops[1][2]));
    return h;
  }();
  return ops;
}

}  // namespace

MPI_Op reduce_op(ReduceOp op, DType dtype) {
  const int which = op == ReduceOp::Max ? 1 : (op == ReduceOp::Min ? 2 : 0);
  if (is_half(dtype)) return half_ops().ops[dtype == DType::BF16 ? 1 : 0][which];
  return which == 1 ? MPI_MAX : (which == 2 ? MPI_MIN : MPI_SUM);
}

void check_reducible(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Avg && !is_float(dtype))
    throw std::invalid_argument(std::string("allreduce avg is not defined for integer dtype ") + dtype_name(dtype));
}

void divide_in_place(void* buffer, std::size_t count, DType dtype, int divisor) {
  const float inv = 1.0f / static_cast<float>(divisor);
  switch (dtype) {
    case DType::F32: {
      auto* p = static_cast<float*>(buffer);
      for (std::size_t i = 0; i < count; ++i) p[i] *= inv;
      return;
    }
    case DType::F64: {
      auto* p = static_cast<double*>(buffer);
      for (std::size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DType::F16:
    case DType::BF16: {
      auto* p = static_cast<std::uint16_t*>(buffer);
      const bool bf = dtype == DType::BF16;
      for (std::size_t i = 0; i < count; ++i)
        p[i] = bf ? float_to_bf16(bf16_to_float(p[i]) * inv) : float_to_f16(f16_to_float(p[i]) * inv);
      return;
    }
    default:
      check_reducible(dtype, ReduceOp::Avg);
  }
}

}  // namespace mnddp::mpi_detail
