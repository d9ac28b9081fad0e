// The element types and reductions a communicator moves, with every fact about each type in one
// table (name, size, float or not). Each library's own mapping is written once: MPI in
// mpi_comm.cpp, NCCL in nccl_comm.cpp, torch in tensor_comm.cpp, HDF5 in ckpt/checkpoint_file.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace mnddp {

enum class DType { F32, F64, F16, BF16, I32, I64, U8 };
enum class ReduceOp { Sum, Avg, Max, Min };

struct DTypeInfo {
  DType dtype;
  const char* name;  // numpy's and torch's spelling: "float32", "bfloat16", ...
  std::size_t size;  // bytes per element
  bool is_float;
};

// Indexed by the enum's value.
inline constexpr std::array<DTypeInfo, 7> kDTypes = {{{DType::F32, "float32", 4, true},
                                                      {DType::F64, "float64", 8, true},
                                                      {DType::F16, "float16", 2, true},
                                                      {DType::BF16, "bfloat16", 2, true},
                                                      {DType::I32, "int32", 4, false},
                                                      {DType::I64, "int64", 8, false},
                                                      {DType::U8, "uint8", 1, false}}};

constexpr const DTypeInfo& dtype_info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }
constexpr std::size_t dtype_size(DType dtype) { return dtype_info(dtype).size; }
constexpr const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }
constexpr bool is_float(DType dtype) { return dtype_info(dtype).is_float; }
constexpr bool is_half(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }
// The type named `name` (dtype_name's spelling), if any.
constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (name == info.name) return info.dtype;
  return std::nullopt;
}

const char* reduce_op_name(ReduceOp op);

}  // namespace mnddp
