#include "mnddp/ckpt/array_tensor.hpp"

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "mnddp/comm/tensor_comm.hpp"

namespace mnddp {

at::Tensor to_tensor(ArrayData&& array) {
  const auto options = at::TensorOptions().dtype(to_scalar_type(array.dtype));
  if (array.numel() == 0) return at::empty(array.shape, options);
  // operator new's alignment (16 bytes) is enough for every element type a checkpoint stores.
  auto owner = std::make_unique<ArrayData>(std::move(array));
  ArrayData* held = owner.get();
  at::Tensor tensor = at::from_blob(
      held->bytes.data(), held->shape, [held](void*) { delete held; }, options);
  owner.release();  // the tensor's storage deletes it now
  return tensor;
}

}  // namespace mnddp
