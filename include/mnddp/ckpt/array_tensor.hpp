// A checkpoint array read from HDF5 as a torch tensor. The tensor takes over the array's bytes instead
// of copying them: on resume that is a copy of the whole checkpoint saved.
#pragma once

#include <ATen/core/Tensor.h>

#include "mnddp/ckpt/checkpoint_file.hpp"

namespace mnddp {

// A contiguous CPU tensor of the array's dtype and shape, owning its bytes (`array` is left empty).
at::Tensor to_tensor(ArrayData&& array);

}  // namespace mnddp
