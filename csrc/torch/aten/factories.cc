// Kernels that create or re-view neuron tensors without touching their data:
// allocation, and the view ops every other op is built on.
#include <ATen/EmptyTensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

c10::Device target_device(std::optional<c10::Device> device) {
  const auto index = device && device->has_index() ? device->index() : -1;
  return c10::Device(kNeuron, resolve_device_index(index));
}

void check_not_pinned(std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "Only CPU tensors can be pinned; neuron tensors live in device "
              "memory already.");
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
    std::optional<at::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  check_not_pinned(pin_memory);
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron tensors support the strided layout only, got ",
              *layout);
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_generic(
      size, c10::GetAllocator(kNeuron),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(c10::get_default_dtype_as_scalartype()), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_not_pinned(pin_memory);
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron tensors support the strided layout only, got ",
              *layout);
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_strided_generic(
      size, stride, c10::GetAllocator(kNeuron),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(c10::get_default_dtype_as_scalartype()));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  // View ops are device-generic: a new TensorImpl over the same storage.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
}

}  // namespace
}  // namespace openneuron::integration
