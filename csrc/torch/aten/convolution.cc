// Convolution. PyTorch picks a convolution algorithm per device type and
// sends devices it does not know to convolution_overrideable; on the host
// driver that runs ATen's CPU convolution (the same algorithm selection as on
// CPU) on device memory. A device the host cannot address runs it as device
// kernels (eager/convolution_kernels.h), or, for what those lack, on CPU
// copies (the CPU fallback, counted and reported).
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "torch/aten/cpu_fallback.h"
#include "torch/aten/eager/convolution_kernels.h"
#include "torch/aten/host/host_call.h"
#include "torch/aten/router.h"
#include "torch/runtime/device.h"
#include "torch/runtime/settings.h"

namespace openneuron::integration {
namespace {

// Arguments as CPU copies, results copied back (host_addressable false).
class CopyingCall {
 public:
  CopyingCall(const char* op, c10::Device device) : scope_(op), device_(device) {}
  at::Tensor cpu(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }
  std::optional<at::Tensor> cpu(const std::optional<at::Tensor>& t) {
    if (!t) return t;
    return cpu(*t);
  }
  at::Tensor neuron(const at::Tensor& t) { return t.defined() ? t.to(device_) : t; }

 private:
  CpuFallbackScope scope_;
  c10::Device device_;
};

// Runs `body(call)` with the host driver's views, or with copies.
template <class Body>
auto on_host(const char* op, const at::Tensor& input, Body&& body) {
  if (host_addressable()) {
    HostCall call(input.device().index());
    return body(call);
  }
  CopyingCall call(op, input.device());
  return body(call);
}

at::Tensor convolution_overrideable(
    const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups) {
  if (!host_addressable() && settings().eager_kernels)
    if (auto out = device_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                                      groups))
      return *out;
  return on_host("aten::convolution_overrideable", input, [&](auto& call) {
    return call.neuron(at::convolution(call.cpu(input), call.cpu(weight), call.cpu(bias), stride,
                                       padding, dilation, transposed, output_padding, groups));
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  // The bias has one entry per output channel.
  const int64_t out_channels =
      transposed ? weight.size(1) * groups : weight.size(0);
  const std::vector<int64_t> bias_sizes{out_channels};
  if (!host_addressable() && settings().eager_kernels)
    if (auto grads = device_convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                                                 output_padding, groups, output_mask))
      return *grads;
  return on_host("aten::convolution_backward_overrideable", input, [&](auto& call) {
    auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
        call.cpu(grad_output), call.cpu(input), call.cpu(weight), bias_sizes, stride, padding,
        dilation, transposed, output_padding, groups, output_mask);
    return std::tuple<at::Tensor, at::Tensor, at::Tensor>{
        call.neuron(grad_input), call.neuron(grad_weight), call.neuron(grad_bias)};
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable",
         TORCH_FN(convolution_backward_overrideable));
}

}  // namespace
}  // namespace openneuron::integration
