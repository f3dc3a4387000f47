#include "torch/aten/host/cpu_views.h"

#include <cstring>

#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/_efficientzerotensor.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/native/SparseTensorUtils.h>
#include <c10/core/RefcountedDeleter.h>
#include <c10/core/TensorImpl.h>

#include "torch/aten/sparse_tensors.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/device_allocator.h"
#include "torch/runtime/transfer_stats.h"

namespace openneuron::integration {
namespace {

at::Tensor make_tensor(c10::Storage storage, c10::DispatchKey key,
                       const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(),
                              like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return at::Tensor(std::move(impl));
}

// A quantized tensor over `storage` with `key` and `like`'s metadata and
// quantizer (per-channel scales and zero points as `scales_on` gives them).
template <class TensorsOn>
at::Tensor make_quantized(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like,
                          TensorsOn&& scales_on) {
  at::QuantizerPtr quantizer = at::get_qtensorimpl(like)->quantizer();
  if (quantizer->qscheme() == at::kPerChannelAffine ||
      quantizer->qscheme() == at::kPerChannelAffineFloatQParams) {
    auto* per_channel = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
    quantizer = at::make_per_channel_affine_quantizer(
        scales_on(per_channel->scales()), scales_on(per_channel->zero_points()),
        per_channel->axis(), per_channel->scalar_type());
  }
  auto impl = c10::make_intrusive<at::QTensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), like.dtype(), std::move(quantizer));
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return at::Tensor(std::move(impl));
}

bool same_metadata(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) &&
         a.storage_offset() == b.storage_offset();
}

}  // namespace

// The entry of storages_ whose neuron storage is (an alias of) this one.
std::optional<size_t> CpuViews::find_storage(const c10::Storage& neuron_storage) {
  auto found = by_neuron_storage_.find(
      neuron_storage.unsafeGetStorageImpl(), storages_.size(),
      [&](size_t i) { return storages_[i].first.unsafeGetStorageImpl(); });
  if (found) return found;
  // Storages shared through a refcounted deleter alias without being the
  // same StorageImpl (is_alias_of); neuron memory never uses one, but check.
  if (neuron_storage.data_ptr().get_deleter() == &c10::refcounted_deleter)
    for (size_t i = 0; i < storages_.size(); ++i)
      if (storages_[i].first.is_alias_of(neuron_storage)) return i;
  return std::nullopt;
}

c10::Storage CpuViews::to_cpu(const c10::Storage& neuron_storage) {
  if (auto i = find_storage(neuron_storage)) return storages_[*i].second;
  auto* impl = neuron_storage.unsafeGetStorageImpl();
  c10::Storage cpu(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(impl->mutable_data(), c10::Device(c10::kCPU)),
      device_memory_as_cpu_allocator(neuron_storage.device().index()),
      impl->resizable()));
  storages_.emplace_back(neuron_storage, cpu);
  return cpu;
}

at::Tensor CpuViews::to_cpu(const at::Tensor& t) {
  if (auto i = by_neuron_tensor_.find(t.unsafeGetTensorImpl(), tensors_.size(),
                                      [&](size_t j) { return tensors_[j].second->unsafeGetTensorImpl(); }))
    return tensors_[*i].first;
  // A ZeroTensor has no data to view: its CPU twin is a CPU ZeroTensor.
  at::Tensor cpu;
  if (t._is_zerotensor()) {
    cpu = at::_efficientzerotensor(t.sizes(), t.options().device(c10::kCPU));
  } else if (t.is_sparse() || is_compressed(t)) {
    // Sparse: a CPU sparse tensor over views of the components.
    c10::SmallVector<at::Tensor, 3> parts;
    // (held: to_cpu keeps pointers, and the impl hands its components out by value)
    for (at::Tensor& part : sparse_parts(t)) parts.push_back(to_cpu(held_.emplace_back(std::move(part))));
    cpu = make_sparse(t, c10::Device(c10::kCPU), parts);
  } else if (t.is_quantized()) {
    // Quantized: a QuantizedCPU view, its per-channel parameters viewed too.
    cpu = make_quantized(to_cpu(t.storage()), c10::DispatchKey::QuantizedCPU, t,
                         [&](const at::Tensor& p) { return p.is_cpu() ? p : to_cpu(held_.emplace_back(p)); });
  } else {
    cpu = make_tensor(to_cpu(t.storage()), c10::DispatchKey::CPU, t);
  }
  tensors_.emplace_back(cpu, &t);
  return cpu;
}

void CpuViews::write_back() {
  // Storages first: a resize moved the bytes into fresh device memory.
  for (auto& [neuron, cpu] : storages_) {
    auto* n = neuron.unsafeGetStorageImpl();
    auto* c = cpu.unsafeGetStorageImpl();
    if (c->data() == n->data() && c->nbytes() == n->nbytes()) continue;
    auto data = c->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    const size_t nbytes = c->nbytes();
    c->set_data_ptr_noswap(
        c10::DataPtr(data.get(), c10::Device(c10::kCPU)));  // view stays valid
    if (data.get() && !is_device_memory(data)) {
      // Not expected (view storages allocate device memory); copy to be safe.
      auto copy = allocate_device_memory(nbytes, device_, neuron.device());
      std::memcpy(copy.get(), data.get(), nbytes);
      record_transfer(Direction::HostToDevice, nbytes);
      data = std::move(copy);
    }
    data.unsafe_set_device(neuron.device());
    n->set_data_ptr_noswap(std::move(data));
    n->set_nbytes(nbytes);
  }
  c10::SmallVector<std::pair<at::Tensor, const at::Tensor*>, 2> sparse;
  for (auto& [cpu, neuron] : tensors_) {
    if (neuron->is_sparse() || is_compressed(*neuron)) {
      sparse.emplace_back(cpu, neuron);  // after the dense ones: its components are among them
      continue;
    }
    auto* impl = neuron->unsafeGetTensorImpl();
    if (!cpu.storage().is_alias_of(to_cpu(neuron->storage())))
      impl->set_storage_keep_dtype(neuron_storage_for(cpu.storage()));
    if (!same_metadata(cpu, *neuron))
      impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(),
                                  cpu.storage_offset());
  }
  // A kernel that changed a sparse tensor (add_, copy_, resize_as_, zero_)
  // gave its CPU view new components: the neuron tensor takes them.
  for (auto& [cpu, neuron] : sparse) write_back_sparse(cpu, *neuron);
}

void CpuViews::write_back_sparse(const at::Tensor& cpu, const at::Tensor& neuron) {
  const auto cpu_parts = sparse_parts(cpu);
  const auto neuron_parts = sparse_parts(neuron);
  bool changed = !cpu.sizes().equals(neuron.sizes());
  c10::SmallVector<at::Tensor, 3> parts;
  for (size_t i = 0; i < cpu_parts.size(); ++i) {
    parts.push_back(to_neuron(cpu_parts[i]));
    changed |= !parts.back().is_same(neuron_parts[i]);
  }
  if (neuron.is_sparse()) {
    auto* impl = at::sparse::get_sparse_impl(neuron);
    auto* cpu_impl = at::sparse::get_sparse_impl(cpu);
    if (changed) {
      impl->raw_resize_(cpu_impl->sparse_dim(), cpu_impl->dense_dim(), cpu.sizes());
      impl->set_indices_and_values_unsafe(parts[0], parts[1]);
    }
    impl->set_coalesced(cpu_impl->coalesced());
  } else if (changed) {
    at::sparse_csr::get_sparse_csr_impl(neuron)->set_member_tensors(parts[0], parts[1], parts[2],
                                                                    cpu.sizes());
  }
}

c10::Storage CpuViews::neuron_storage_for(const c10::Storage& cpu_storage) {
  // View storages are made here (no refcounted deleter): identity is aliasing.
  if (auto i = by_cpu_storage_.find(cpu_storage.unsafeGetStorageImpl(), storages_.size(),
                                    [&](size_t j) { return storages_[j].second.unsafeGetStorageImpl(); }))
    return storages_[*i].first;
  if (auto i = by_adopted_storage_.find(cpu_storage.unsafeGetStorageImpl(), adopted_.size(),
                                        [&](size_t j) { return adopted_[j].first; }))
    return adopted_[*i].second;
  auto neuron = adopt(cpu_storage);
  adopted_.emplace_back(cpu_storage.unsafeGetStorageImpl(), neuron);
  return neuron;
}

c10::Storage CpuViews::adopt(const c10::Storage& cpu_storage) {
  auto* c = cpu_storage.unsafeGetStorageImpl();
  const size_t nbytes = c->nbytes();
  const c10::Device device(kNeuron, device_);
  if (c->data_ptr().get() == nullptr || is_device_memory(c->data_ptr())) {
    // Born in device memory: the storage itself becomes a neuron storage,
    // no copy and no new allocation. (The kernel's CPU tensor that still
    // points at it is about to be dropped.)
    c->mutable_data_ptr().unsafe_set_device(device);
    c->set_allocator(c10::GetAllocator(kNeuron));
    return cpu_storage;
  }
  // Allocated outside the redirect (e.g. on a worker thread): copy it in.
  TransferCauseGuard cause(Cause::KernelOutput);
  auto data = allocate_device_memory(nbytes, device_, device);
  if (nbytes) std::memcpy(data.get(), c->data(), nbytes);
  record_transfer(Direction::HostToDevice, nbytes);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, std::move(data),
      c10::GetAllocator(kNeuron), /*resizable=*/true));
}

at::Tensor CpuViews::to_neuron(const at::Tensor& cpu_tensor) {
  if (!cpu_tensor.defined() || !cpu_tensor.is_cpu()) return cpu_tensor;
  if (auto i = by_cpu_tensor_.find(cpu_tensor.unsafeGetTensorImpl(), tensors_.size(),
                                   [&](size_t j) { return tensors_[j].first.unsafeGetTensorImpl(); }))
    return *tensors_[*i].second;
  // Sparse: a neuron sparse tensor over the components (views of inputs'
  // components map back to them).
  if (cpu_tensor.is_sparse() || is_compressed(cpu_tensor)) {
    c10::SmallVector<at::Tensor, 3> parts;
    for (const at::Tensor& part : sparse_parts(cpu_tensor)) parts.push_back(to_neuron(part));
    return make_sparse(cpu_tensor, c10::Device(kNeuron, device_), parts);
  }
  auto storage = neuron_storage_for(cpu_tensor.storage());
  if (cpu_tensor.is_quantized()) {
    // Per-channel parameters become neuron tensors as well (views of the
    // caller's, which the quantizer then keeps alive), as on CUDA.
    return make_quantized(std::move(storage), c10::DispatchKey::QuantizedPrivateUse1,
                          cpu_tensor, [&](const at::Tensor& p) { return p.is_cpu() ? to_neuron(p) : p; });
  }
  if (cpu_tensor.use_count() == 1) {
    // Nobody else holds the kernel's fresh result: turn that TensorImpl into
    // the neuron tensor instead of building a second one (half the cost of
    // a small op is making and destroying TensorImpls).
    auto* impl = cpu_tensor.unsafeGetTensorImpl();
    impl->set_storage_keep_dtype(std::move(storage));
    impl->_change_backend_component_keys(impl->storage().device());
    return cpu_tensor;
  }
  return make_tensor(std::move(storage), c10::DispatchKey::PrivateUse1,
                     cpu_tensor);
}

}  // namespace openneuron::integration
