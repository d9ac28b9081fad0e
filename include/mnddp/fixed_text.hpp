// Text into a fixed-size char array, cut short when longer: for records that must not allocate (the
// collective ring buffer, the activity board, watchdog messages).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace mnddp {

template <std::size_t N>
void copy_cut(char (&to)[N], std::string_view from) {
  const std::size_t n = std::min(N - 1, from.size());
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

}  // namespace mnddp
