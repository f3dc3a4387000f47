// CPU views of neuron tensors, for running ATen's CPU kernels directly on
// host-addressable device memory (the host driver's kernel library).
//
// A CPU view is a CPU tensor whose storage points at the neuron storage's
// bytes. Views of one neuron storage share one CPU storage, so aliasing is
// seen by the kernel exactly as on CPU. After the kernel ran, changes the
// kernel made to a view (resize_, set_, as_strided_ ...) are carried back to
// the neuron tensor, and the kernel's outputs become neuron tensors: a view
// of an input maps back to that input's storage, a fresh output adopts the
// device memory it was allocated in (see cpu_allocation_redirect.h).
//
// The neuron tensors given to to_cpu must outlive the CpuViews: it keeps
// pointers, not references, to them (taking a reference to a tensor Python
// holds costs a Python incref and decref, as much as a small kernel's
// bookkeeping).
#pragma once

#include <utility>
#include <c10/util/SmallVector.h>

#include <ATen/Tensor.h>
#include <c10/core/Storage.h>

namespace openneuron::integration {

class CpuViews {
 public:
  explicit CpuViews(c10::DeviceIndex device) : device_(device) {}

  at::Tensor to_cpu(const at::Tensor& neuron_tensor);
  c10::Storage to_cpu(const c10::Storage& neuron_storage);
  // Applies metadata and storage changes the kernel made to the CPU views.
  void write_back();
  // A kernel result as a neuron tensor (the original one for in-place ops).
  at::Tensor to_neuron(const at::Tensor& cpu_tensor);

 private:
  c10::Storage neuron_storage_for(const c10::Storage& cpu_storage);
  c10::Storage adopt(const c10::Storage& cpu_storage);

  c10::DeviceIndex device_;
  // neuron storage -> its CPU view storage
  c10::SmallVector<std::pair<c10::Storage, c10::Storage>, 4> storages_;
  // CPU view tensor -> the neuron tensor it shows
  c10::SmallVector<std::pair<at::Tensor, const at::Tensor*>, 4> tensors_;
  // storages adopted from kernel outputs: CPU storage -> neuron storage
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> adopted_;
};

}  // namespace openneuron::integration
