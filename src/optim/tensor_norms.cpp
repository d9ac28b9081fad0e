// The default per-tensor norms of LARS and LAMB.
#include "mnddp/optim/tensor_norms.hpp"

#include <ATen/ATen.h>

namespace mnddp {

at::Tensor own_norms(const std::vector<at::Tensor>& tensors) { return at::stack(at::_foreach_norm(tensors)); }

}  // namespace mnddp
