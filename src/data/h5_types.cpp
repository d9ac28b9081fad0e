// SampleType <-> HDF5 datatypes, including IEEE half, which HDF5 1.10 describes only by its fields.
#include "mnddp/data/h5_types.hpp"

#include <mutex>

#include "mnddp/check.hpp"

namespace mnddp {
namespace {

// IEEE binary16 from a float32 template: sign bit 15, exponent bits 10-14 (bias 15), mantissa 0-9.
H5Handle half_type(H5T_order_t order) {
  H5Handle type(H5Tcopy(H5T_IEEE_F32LE));
  MNDDP_H5_CHECK(type.get());
  MNDDP_H5_CHECK(H5Tset_fields(type.get(), 15, 10, 5, 0, 10));
  MNDDP_H5_CHECK(H5Tset_size(type.get(), 2));
  MNDDP_H5_CHECK(H5Tset_ebias(type.get(), 15));
  MNDDP_H5_CHECK(H5Tset_order(type.get(), order));
  return type;
}

H5Handle copy_type(hid_t predefined) {
  H5Handle type(H5Tcopy(predefined));
  MNDDP_H5_CHECK(type.get());
  return type;
}

}  // namespace

std::optional<SampleType> sample_type_of(hid_t type) {
  std::lock_guard lock(hdf5_mutex());
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if (size == 1) return is_signed ? SampleType::I8 : SampleType::U8;
      if (size == 2) return is_signed ? SampleType::I16 : SampleType::U16;
      if (size == 4) return is_signed ? SampleType::I32 : SampleType::U32;
      if (size == 8) return is_signed ? SampleType::I64 : SampleType::U64;
      return std::nullopt;
    }
    case H5T_FLOAT:
      if (size == 2) return SampleType::F16;
      if (size == 4) return SampleType::F32;
      if (size == 8) return SampleType::F64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

H5Handle h5_memory_type(SampleType type) {
  std::lock_guard lock(hdf5_mutex());
  switch (type) {
    case SampleType::U8:
      return copy_type(H5T_NATIVE_UINT8);
    case SampleType::U16:
      return copy_type(H5T_NATIVE_UINT16);
    case SampleType::U32:
      return copy_type(H5T_NATIVE_UINT32);
    case SampleType::U64:
      return copy_type(H5T_NATIVE_UINT64);
    case SampleType::I8:
      return copy_type(H5T_NATIVE_INT8);
    case SampleType::I16:
      return copy_type(H5T_NATIVE_INT16);
    case SampleType::I32:
      return copy_type(H5T_NATIVE_INT32);
    case SampleType::I64:
      return copy_type(H5T_NATIVE_INT64);
    case SampleType::F16:
      return half_type(H5Tget_order(H5T_NATIVE_FLOAT));
    case SampleType::F32:
      return copy_type(H5T_NATIVE_FLOAT);
    case SampleType::F64:
      return copy_type(H5T_NATIVE_DOUBLE);
  }
  throw Error("h5_memory_type: unknown sample type");
}

H5Handle h5_file_type(SampleType type) {
  std::lock_guard lock(hdf5_mutex());
  switch (type) {
    case SampleType::U8:
      return copy_type(H5T_STD_U8LE);
    case SampleType::U16:
      return copy_type(H5T_STD_U16LE);
    case SampleType::U32:
      return copy_type(H5T_STD_U32LE);
    case SampleType::U64:
      return copy_type(H5T_STD_U64LE);
    case SampleType::I8:
      return copy_type(H5T_STD_I8LE);
    case SampleType::I16:
      return copy_type(H5T_STD_I16LE);
    case SampleType::I32:
      return copy_type(H5T_STD_I32LE);
    case SampleType::I64:
      return copy_type(H5T_STD_I64LE);
    case SampleType::F16:
      return half_type(H5T_ORDER_LE);
    case SampleType::F32:
      return copy_type(H5T_IEEE_F32LE);
    case SampleType::F64:
      return copy_type(H5T_IEEE_F64LE);
  }
  throw Error("h5_file_type: unknown sample type");
}

}  // namespace mnddp
