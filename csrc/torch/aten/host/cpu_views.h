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

#include <list>
#include <optional>
#include <unordered_map>
#include <utility>
#include <c10/util/SmallVector.h>

#include <ATen/Tensor.h>
#include <c10/core/Storage.h>

namespace openneuron::integration {

// Finds an entry of an append-only list by a pointer key. Most ops have a
// handful of tensors, scanned in place; foreach ops have hundreds, and a
// scan per tensor made them quadratic, so past a few entries a hash index is
// built (lazily, over the entries appended since the last lookup).
class PointerIndex {
 public:
  template <class KeyOf>
  std::optional<size_t> find(const void* key, size_t count, KeyOf key_of) {
    if (count <= kScanned) {
      for (size_t i = 0; i < count; ++i)
        if (key_of(i) == key) return i;
      return std::nullopt;
    }
    for (; indexed_ < count; ++indexed_) index_.emplace(key_of(indexed_), indexed_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static constexpr size_t kScanned = 8;
  size_t indexed_ = 0;
  std::unordered_map<const void*, size_t> index_;
};

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
  void write_back_sparse(const at::Tensor& cpu, const at::Tensor& neuron);
  c10::Storage adopt(const c10::Storage& cpu_storage);
  std::optional<size_t> find_storage(const c10::Storage& neuron_storage);

  c10::DeviceIndex device_;
  // Neuron tensors viewed here that no caller holds (a quantizer's
  // per-channel scales, a sparse tensor's components, returned by value):
  // to_cpu keeps pointers to them. A list: stable references, and no
  // allocation while empty (a deque allocates when made, on every op).
  std::list<at::Tensor> held_;
  // neuron storage -> its CPU view storage
  c10::SmallVector<std::pair<c10::Storage, c10::Storage>, 4> storages_;
  // CPU view tensor -> the neuron tensor it shows
  c10::SmallVector<std::pair<at::Tensor, const at::Tensor*>, 4> tensors_;
  // storages adopted from kernel outputs: CPU storage -> neuron storage
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> adopted_;
  PointerIndex by_neuron_storage_, by_cpu_storage_, by_neuron_tensor_, by_cpu_tensor_,
      by_adopted_storage_;
};

}  // namespace openneuron::integration
