// HDF5 prints its error stack to stderr on every failed call; a fuzzer makes millions.
#pragma once

#include <hdf5.h>

namespace mnddp::fuzz {

inline void quiet_hdf5() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

}  // namespace mnddp::fuzz
