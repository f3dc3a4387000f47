#include "torch/aten/device_staging.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "hal/error.h"
#include "torch/runtime/profiler.h"

namespace openneuron::integration {
namespace {

// Elements from the first to the last one `t` covers, in its storage.
int64_t span_elements(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += t.stride(d) * (t.size(d) - 1);
  return last + 1;
}

// The address is only arithmetic here: the driver moves the bytes.
const char* device_address(const at::Tensor& t) {
  return static_cast<const char*>(t.storage().data()) + t.storage_offset() * t.itemsize();
}
// For writing: a copy-on-write storage gets its own memory first.
char* mutable_device_address(const at::Tensor& t) {
  return static_cast<char*>(t.storage().mutable_data()) + t.storage_offset() * t.itemsize();
}

void driver_copy(void* dst, const void* src, size_t bytes, hal::CopyKind kind, c10::DeviceIndex device) {
  DeviceActivity activity(nullptr, device,
                          kind == hal::CopyKind::HostToDevice   ? "Memcpy HtoD (Pageable -> Device)"
                          : kind == hal::CopyKind::DeviceToHost ? "Memcpy DtoH (Device -> Pageable)"
                                                                : "Memcpy DtoD (Device -> Device)",
                          DeviceActivityKind::Copy, static_cast<int64_t>(bytes));
  try {
    hal::driver().copy(dst, src, bytes, kind);
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "neuron ", hal::to_string(kind), " copy of ", bytes, " bytes: ", e.what());
  }
}

void check_plain(const at::Tensor& t, const char* what) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      t.layout() == c10::kStrided && !t.is_quantized(), what, ": ", t.toString(),
      " tensors are not supported on a neuron device whose memory the host cannot address (",
      hal::driver().name(), " driver); only strided, non-quantized tensors copy directly");
}

// A CPU tensor with `like`'s dtype holding `span` elements, as `like`'s
// strided view of them.
std::pair<at::Tensor, at::Tensor> staging_for(const at::Tensor& like, int64_t span) {
  at::Tensor flat = at::empty({span}, like.options().device(c10::kCPU).layout(c10::kStrided));
  at::Tensor view = flat.as_strided(like.sizes(), like.strides(), 0);
  return {flat, view};
}

}  // namespace

at::Tensor download(const at::Tensor& t) {
  check_plain(t, "copy from neuron");
  if (t.numel() == 0) return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU));
  const int64_t span = span_elements(t);
  auto [flat, view] = staging_for(t, span);
  driver_copy(flat.data_ptr(), device_address(t), span * t.itemsize(), hal::CopyKind::DeviceToHost,
              t.device().index());
  if (t.is_conj()) view._set_conj(true);
  if (t.is_neg()) view._set_neg(true);
  return view;
}

void upload(const at::Tensor& dst, const at::Tensor& src) {
  check_plain(dst, "copy to neuron");
  if (dst.numel() == 0) return;
  const int64_t span = span_elements(dst);
  auto [flat, view] = staging_for(dst, span);
  const size_t bytes = span * dst.itemsize();
  if (span != dst.numel())  // gaps between the elements keep their values
    driver_copy(flat.data_ptr(), device_address(dst), bytes, hal::CopyKind::DeviceToHost, dst.device().index());
  if (dst.is_conj()) view._set_conj(true);
  if (dst.is_neg()) view._set_neg(true);
  view.copy_(src);
  driver_copy(mutable_device_address(dst), flat.const_data_ptr(), bytes, hal::CopyKind::HostToDevice,
              dst.device().index());
}

}  // namespace openneuron::integration
