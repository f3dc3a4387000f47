// Ops that change or compare a tensor's shape or storage, not its values:
// resize_, set_ and the storage queries forward-mode AD uses. They are metadata plus, when a tensor grows past its storage, a
// storage resize through the PrivateUse1 hook (hooks.cc), which moves the
// old bytes with a queued device copy. ATen's CPU kernels would copy with
// memcpy, reading device memory from the host.
#include <ATen/ATen.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_has_same_storage_numel_native.h>
#include <ATen/ops/_new_zeros_with_same_feature_meta_native.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/is_set_to_native.h>
#include <torch/library.h>

#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

void grow_storage(const at::Tensor& self) {
  if (self.numel() == 0) return;
  const size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                         self.itemsize(), self.storage_offset());
  const c10::Storage& storage = self.unsafeGetTensorImpl()->unsafe_storage();
  if (needed > storage.nbytes())
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(storage, needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  at::native::resize_impl_cpu_(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt,
                               /*resize_storage=*/false);
  grow_storage(self);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                         c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  const int64_t offset = storage_offset.guard_int(__FILE__, __LINE__);
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const auto strides = C10_AS_INTARRAYREF_SLOW(stride);
  at::native::checkSetStorage(self, source, offset, sizes, strides);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), sizes,
                               strides.data() ? at::OptionalIntArrayRef(strides) : std::nullopt,
                               /*resize_storage=*/false);
  grow_storage(self);
  return self;
}

at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(kNeuron),
                     /*resizable=*/true);
  return set_storage_(self, std::move(empty), 0, {0}, {});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage_));
  m.impl("set_", TORCH_FN(set_empty_));
  // Metadata and storage-size queries (device-generic, as on CUDA): on the
  // CPU-fallback path they would compare compact copies, not the storages.
  m.impl("_has_same_storage_numel", TORCH_FN(at::native::_has_same_storage_numel));
  m.impl("is_set_to", TORCH_FN(at::native::is_set_to));
  m.impl("is_same_size", TORCH_FN(at::native::is_same_size));
  m.impl("_new_zeros_with_same_feature_meta",
         TORCH_FN(at::native::_new_zeros_with_same_feature_meta));
}

}  // namespace
}  // namespace openneuron::integration
