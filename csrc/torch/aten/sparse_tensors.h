// Sparse neuron tensors (COO and compressed layouts): a sparse tensor is its
// component tensors (indices and values) on the device. The integration
// layer moves and views them component by component.
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/SmallVector.h>

namespace openneuron::integration {

// CSR, CSC, BSR or BSC.
bool is_compressed(const at::Tensor& t);

// The components, read from the tensor itself (no dispatch): indices and
// values, or compressed indices, plain indices and values.
c10::SmallVector<at::Tensor, 3> sparse_parts(const at::Tensor& t);

// A sparse tensor of `like`'s layout, shape and flags over `parts`, on
// `device` (PyTorch's device-generic constructors: no data is copied).
at::Tensor make_sparse(const at::Tensor& like, c10::Device device,
                       const c10::SmallVector<at::Tensor, 3>& parts);

}  // namespace openneuron::integration
