// Convolution on a device whose memory the host cannot address: float32
// 2-d and 1-d forwards and gradients as implicit-GEMM kernels
// where the device's library has it (implicit_gemm_convolution.h); else from ops
// that have device kernels: the (padded) input seen as columns through a
// strided view (im2col, one device copy), a batched matmul on the kernel
// library's gemm, the bias added; the backward as matmuls and, for the
// input's gradient, one strided add per kernel offset (col2im). A
// transposed convolution is the adjoint of the convolution with its weight:
// its forward is that convolution's input gradient, and its gradients are
// that convolution's forward and weight gradient. Dtypes the gemm lacks
// return nullopt (the caller takes the CPU fallback).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <optional>
#include <tuple>

namespace openneuron::integration {

std::optional<at::Tensor> device_convolution(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                             c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                             c10::IntArrayRef output_padding, int64_t groups);

std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> device_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask);

// aten::convolution and aten::convolution_backward from the router (which
// gets them before convolution_overrideable would): true when run here.
bool run_convolution_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration
