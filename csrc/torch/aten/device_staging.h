// Tensors of a device whose memory the host cannot address, moved through
// the driver's copies: a CPU copy of a neuron tensor's elements (with its
// strides), and CPU values written into a neuron tensor's elements. Used by
// copies and .item() when DeviceProperties::host_addressable is false; the
// host driver reads its memory in place instead (host/cpu_views.h).
//
// Callers order these after queued work (wait_current_stream): the driver's
// synchronous copies do not wait for queues.
#pragma once

#include <ATen/core/Tensor.h>

namespace openneuron::integration {

// A CPU tensor with `t`'s sizes, strides, dtype and conjugate/negative bits,
// holding a copy of the span of storage its elements cover.
at::Tensor download(const at::Tensor& t);

// dst = src (broadcast and converted as copy_ does) for a neuron `dst` and a
// CPU `src`. Writes only dst's elements: when they have gaps between them,
// the span is read first so the gaps keep their values.
void upload(const at::Tensor& dst, const at::Tensor& src);

}  // namespace openneuron::integration
