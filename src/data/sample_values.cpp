// Sample values converted and checked (see the header).
#include "sample_values.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "mnddp/error.hpp"
#include "mnddp/finite_scan.hpp"

namespace mnddp {
namespace {

template <typename T>
void convert_to_float(const void* source, float* target, std::size_t count) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(target, source, count * sizeof(float));
  } else {
    const auto* values = static_cast<const T*>(source);
    for (std::size_t i = 0; i < count; ++i) target[i] = static_cast<float>(values[i]);
  }
}

template <typename T>
void convert_to_int64(const void* source, std::int64_t* target, std::size_t count) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    std::memcpy(target, source, count * sizeof(std::int64_t));
  } else {
    const auto* values = static_cast<const T*>(source);
    for (std::size_t i = 0; i < count; ++i) target[i] = static_cast<std::int64_t>(values[i]);
  }
}

// Calls `make.template operator()<T>()` with the C++ type of a native memory type; nullptr for the
// types scan_shards does not admit. Only those (and the float that float16 is widened to) reach here.
template <typename Fn, typename Make>
Fn by_native_type(hid_t native_type, Make make) {
  const std::size_t size = H5Tget_size(native_type);
  if (H5Tget_class(native_type) == H5T_FLOAT) {
    if (size == sizeof(float)) return make.template operator()<float>();
    if (size == sizeof(double)) return make.template operator()<double>();
  } else if (H5Tget_class(native_type) == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(native_type) == H5T_SGN_2;
    if (size == 1)
      return is_signed ? make.template operator()<std::int8_t>() : make.template operator()<std::uint8_t>();
    if (size == 2)
      return is_signed ? make.template operator()<std::int16_t>() : make.template operator()<std::uint16_t>();
    if (size == 4)
      return is_signed ? make.template operator()<std::int32_t>() : make.template operator()<std::uint32_t>();
    if (size == 8)
      return is_signed ? make.template operator()<std::int64_t>() : make.template operator()<std::uint64_t>();
  }
  return nullptr;
}

}  // namespace

ConvertFn converter_for(hid_t native_type) {
  return by_native_type<ConvertFn>(native_type, []<typename T>() -> ConvertFn { return convert_to_float<T>; });
}

ConvertIdsFn id_converter_for(hid_t native_type) {
  return by_native_type<ConvertIdsFn>(native_type, []<typename T>() -> ConvertIdsFn {
    if constexpr (std::is_integral_v<T>)
      return convert_to_int64<T>;
    else
      return nullptr;
  });
}

bool check_nonfinite(NonfinitePolicy policy, bool& warned, const std::string& path, const std::string& x_name,
                     std::int64_t row, const float* values, std::size_t count) {
  if (all_finite(values, count)) return true;
  const float* bad = std::find_if(values, values + count, [](float v) { return !std::isfinite(v); });
  const auto element = bad - values;
  if (policy == NonfinitePolicy::Error)
    throw UsageError(fmt::format(
        "'{}': dataset '{}' sample {} holds a non-finite input ({} at element {}); --nonfinite-inputs error stops "
        "here (warn or ignore let such values through)",
        path, x_name, row, *bad, element));
  if (policy == NonfinitePolicy::Warn && !warned) {
    warned = true;
    spdlog::warn(
        "'{}': dataset '{}' sample {} holds a non-finite input ({} at element {}); passed on "
        "(--nonfinite-inputs warn), further ones in this file are not reported",
        path, x_name, row, *bad, element);
  }
  return false;
}

void check_token_ids(const std::string& path, const std::string& x_name, std::int64_t row, const std::int64_t* ids,
                     std::size_t count, std::int64_t vocab_size) {
  const std::int64_t limit = vocab_size > 0 ? vocab_size : std::numeric_limits<std::int64_t>::max();
  const std::int64_t* bad = std::find_if(ids, ids + count, [&](std::int64_t id) { return id < 0 || id >= limit; });
  if (bad == ids + count) return;
  throw UsageError(
      fmt::format("'{}': dataset '{}' sample {} holds token id {} at position {}, outside [0, {}) set by "
                  "--vocab-size {}",
                  path, x_name, row, *bad, bad - ids, vocab_size, vocab_size));
}

void labels_to_float(SampleType type, const unsigned char* source, float* target, std::size_t count) {
  if (type == SampleType::F32) {
    std::memcpy(target, source, count * sizeof(float));
  } else if (type == SampleType::F64) {
    convert_to_float<double>(source, target, count);
  } else {
    convert_to_float<std::int64_t>(source, target, count);
  }
}

}  // namespace mnddp
