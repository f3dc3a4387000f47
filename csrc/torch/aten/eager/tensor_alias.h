// A tensor over existing device memory with the geometry a kernel needs (a
// matrix view of a vector, a strided window, a tensor as it was before an
// in-place view op), made without dispatch: no autograd, no view tracking.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

namespace openneuron::integration {

inline at::Tensor alias_of_storage(const c10::Storage& storage, c10::DispatchKeySet keys, caffe2::TypeMeta dtype,
                                   c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), keys, dtype);
  impl->set_sizes_and_strides(sizes, strides, offset);
  return at::Tensor(std::move(impl));
}

// `t`'s memory seen with these sizes, strides and storage offset.
inline at::Tensor alias_with(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  return alias_of_storage(t.storage(), t.key_set(), t.dtype(), sizes, strides, offset);
}

}  // namespace openneuron::integration
