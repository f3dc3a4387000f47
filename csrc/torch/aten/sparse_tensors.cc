// Sparse neuron tensors are made by PyTorch's device-generic constructors;
// their other ops go through the router to PyTorch's SparseCPU /
// SparseCsrCPU kernels on CPU views (cpu_views.cc).
#include "torch/aten/sparse_tensors.h"

#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/values_native.h>

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <torch/library.h>

namespace openneuron::integration {

bool is_compressed(const at::Tensor& t) {
  return at::sparse_csr::is_sparse_compressed(t.layout());
}

c10::SmallVector<at::Tensor, 3> sparse_parts(const at::Tensor& t) {
  if (t.is_sparse()) {
    auto* impl = at::sparse::get_sparse_impl(t);
    return {impl->indices(), impl->values()};
  }
  auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
  return {impl->compressed_indices(), impl->plain_indices(), impl->values()};
}

at::Tensor make_sparse(const at::Tensor& like, c10::Device device,
                       const c10::SmallVector<at::Tensor, 3>& parts) {
  auto options = like.options().device(device);
  if (like.is_sparse()) {
    auto* impl = at::sparse::get_sparse_impl(like);
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        impl->sparse_dim(), impl->dense_dim(), like.sizes(), parts[0], parts[1], options,
        impl->coalesced());
  }
  return at::_sparse_compressed_tensor_unsafe(parts[0], parts[1], parts[2], like.sizes(),
                                               options.dtype(like.scalar_type()));
}

namespace {

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_coo));
  // Component accessors return the members themselves (device-generic, as
  // on CUDA): no CPU view of the tensor, whose indices a view would validate
  // by reading device memory.
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_csr));  // block layouts too
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
}

}  // namespace
}  // namespace openneuron::integration
