// Copies between the host and neuron devices, with CUDA's semantics for
// non_blocking: a copy between device memory and pinned host memory is queued
// on the current stream and returns at once; any other copy (pageable host
// memory, dtype or layout conversion) completes before returning, so data is
// never read or written behind the caller's back.
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <torch/library.h>

#include "hal/pinned_allocator.h"
#include "torch/aten/host/cpu_views.h"
#include "torch/aten/device_staging.h"
#include "torch/aten/eager/eager_fusion.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/router.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/pinned_allocator.h"
#include "torch/runtime/profiler.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/streams.h"
#include "torch/runtime/sync_debug.h"
#include "torch/runtime/transfer_stats.h"

namespace openneuron::integration {
namespace {

bool on_neuron(const at::Tensor& t) { return t.device().type() == kNeuron; }

bool can_copy_async(const at::Tensor& dst, const at::Tensor& src) {
  const at::Tensor& host = on_neuron(dst) ? src : dst;
  return on_neuron(dst) != on_neuron(src) && host.is_cpu() &&
         dst.dtype() == src.dtype() && dst.sizes().equals(src.sizes()) &&
         dst.is_contiguous() && src.is_contiguous() &&
         dst.is_conj() == src.is_conj() && dst.is_neg() == src.is_neg() &&
         is_pinned_ptr(host.data_ptr());
}

void copy_async(const at::Tensor& dst, const at::Tensor& src) {
  const bool to_device = on_neuron(dst);
  const auto device = (to_device ? dst : src).device().index();
  auto& queue = queue_for(current_stream(device));
  const size_t nbytes = dst.nbytes();
  record_transfer(to_device ? Direction::HostToDevice : Direction::DeviceToHost,
                  nbytes);
  DeviceActivity activity(&queue, device, to_device ? "Memcpy HtoD (Pinned -> Device)" : "Memcpy DtoH (Device -> Pinned)",
                          DeviceActivityKind::Copy, static_cast<int64_t>(nbytes));
  queue.copy_async(dst.data_ptr(), src.data_ptr(), nbytes,
                   to_device ? hal::CopyKind::HostToDevice
                             : hal::CopyKind::DeviceToHost);
  // The pinned block must not be reused before the copy has run.
  hal::pinned_allocator().record_use(
      to_device ? src.const_data_ptr() : dst.const_data_ptr(), queue);
  if (settings().launch_blocking) queue.synchronize();
}

void record_copy(const at::Tensor& dst, const at::Tensor& src) {
  if (on_neuron(dst) && on_neuron(src)) {
    if (dst.device() != src.device())
      record_transfer(Direction::DeviceToDevice, src.nbytes());
  } else if (on_neuron(dst)) {
    record_transfer(Direction::HostToDevice, src.nbytes());
  } else {
    record_transfer(Direction::DeviceToHost, src.nbytes());
  }
}

bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) &&
         a.strides().equals(b.strides()) && a.is_non_overlapping_and_dense() &&
         a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

// A device whose memory the host cannot address: every byte moves through
// the driver.
at::Tensor& copy_through_driver(at::Tensor& dst, const at::Tensor& src) {
  if (on_neuron(dst) && on_neuron(src) && dst.device() == src.device() &&
      same_dense_layout(dst, src)) {
    // One device-to-device copy, queued in stream order like any kernel.
    auto& queue = current_queue(dst.device().index());
    DeviceActivity activity(&queue, dst.device().index(), "Memcpy DtoD (Device -> Device)", DeviceActivityKind::Copy,
                            static_cast<int64_t>(dst.nbytes()));
    queue.copy_async(dst.data_ptr(), src.const_data_ptr(), dst.nbytes(),
                     hal::CopyKind::DeviceToDevice);
    if (settings().launch_blocking) queue.synchronize();
    return dst;
  }
  // A cast or another layout on one device: a device kernel, in stream order.
  if (on_neuron(dst) && on_neuron(src) && copy_as_eager_kernel(dst, src)) return dst;
  if (on_neuron(src)) wait_current_stream(src.device().index());
  if (on_neuron(dst)) wait_current_stream(dst.device().index());
  record_copy(dst, src);
  const at::Tensor cpu_src = on_neuron(src) ? download(src) : src;
  if (on_neuron(dst)) {
    upload(dst, cpu_src);
  } else {
    dst.copy_(cpu_src);
  }
  return dst;
}

at::Tensor& copy_into(at::Tensor& dst, const at::Tensor& src,
                      bool non_blocking) {
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&dst, &src}) {
    TORCH_CHECK(on_neuron(*t) || t->is_cpu(), "copy_: cannot copy between ",
                src.device(), " and ", dst.device(),
                "; neuron tensors copy to and from CPU and neuron tensors.");
  }
  if (dst.numel() == 0) return dst;
  TORCH_CHECK(!dst._is_zerotensor(), "ZeroTensors are immutable. Please "
              "materialize the tensor using `.clone()`, if you want a mutable "
              "zero tensor.");
  if (src._is_zerotensor()) {  // has no data: its values are all zero
    dst.zero_();
    return dst;
  }
  // A copy within one device may join a held chain (a cast, say); any other
  // copy reads or writes memory held work may write.
  if (on_neuron(dst) && on_neuron(src) && dst.device() == src.device() && hold_copy_for_fusion(dst, src))
    return dst;
  flush_held_calls(-1);
  if (non_blocking && can_copy_async(dst, src)) {
    copy_async(dst, src);
    return dst;
  }
  // (A CPU fallback's own copies are part of the sync it reported.)
  if (on_neuron(dst) != on_neuron(src) && current_transfer_cause() != Cause::CpuFallback)
    note_host_sync("aten::copy_", on_neuron(dst) ? "a blocking copy from the host" : "a blocking copy to the host");
  if (!host_addressable()) return copy_through_driver(dst, src);
  const auto device = (on_neuron(dst) ? dst : src).device().index();
  // A cast or another layout on one device: a device kernel, in stream order.
  if (on_neuron(dst) && on_neuron(src) && copy_as_eager_kernel(dst, src)) return dst;
  if (on_neuron(src)) wait_current_stream(src.device().index());
  if (on_neuron(dst)) wait_current_stream(dst.device().index());
  record_copy(dst, src);
  CpuViews views(device);
  auto cpu_dst = on_neuron(dst) ? views.to_cpu(dst) : dst;
  const auto cpu_src = on_neuron(src) ? views.to_cpu(src) : src;
  RedirectCpuAllocations redirect(device);
  cpu_dst.copy_(cpu_src);
  return dst;
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  return copy_into(self, src, non_blocking);
}

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst,
                      bool non_blocking) {
  at::Tensor out = dst;
  return copy_into(out, self, non_blocking);
}

at::Tensor _copy_from_and_resize(const at::Tensor& self,
                                 const at::Tensor& dst) {
  dst.resize_(self.sizes());
  at::Tensor out = dst;
  return copy_into(out, self, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  note_host_sync("aten::_local_scalar_dense", "Tensor.item(), bool(), int(), float() or printing");
  wait_current_stream(self.device().index());
  record_transfer(Direction::DeviceToHost, self.itemsize());
  if (!host_addressable()) return at::native::_local_scalar_dense_cpu(download(self));
  CpuViews views(self.device().index());
  return at::native::_local_scalar_dense_cpu(views.to_cpu(self));
}

// A tensor constant of traced code (torch.tensor(...) in a compiled
// function) is lifted with a copy: a device clone, where the router would
// take the CPU fallback on drivers the host cannot address.
at::Tensor lift_fresh_copy(const at::Tensor& self) { return self.clone(); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("lift_fresh_copy", TORCH_FN(lift_fresh_copy));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

// Quantized tensors move the same way (their CPU views are quantized too).
// Their factories are PyTorch's device-generic ones (new_qtensor takes the
// neuron allocator); through the router, which makes every result a neuron
// tensor, .cpu() of a quantized tensor would stay on neuron.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_unknown_quantized));
  m.impl("empty_strided", TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized",
         TORCH_FN(at::native::empty_per_channel_affine_quantized));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
}

}  // namespace
}  // namespace openneuron::integration
