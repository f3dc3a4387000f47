// float32 convolutions (2-d, and 1-d as 2-d of height 1) as one implicit-GEMM
// kernel of the GLSL library (glsl_gemm.h's conv2d_t*): the output is W
// times the input's columns, which are read from the input where the
// product needs them, never written out (im2col would write a buffer
// KH*KW times the input's size and read it back). The bias is the
// kernel's added term.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace openneuron::integration {

// nullopt when the device has no such kernel (the C++ target, devices
// without the tiled kernels) or the call does not suit it (groups, other
// dtypes and ranks, shapes the tiled product would not take): the caller
// takes its im2col route.
std::optional<at::Tensor> implicit_gemm_convolution(const at::Tensor& input, const at::Tensor& weight,
                                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                    int64_t groups);

// The input's gradient of such a convolution as one kernel (conv2d_dgrad_t*):
// grad_output times the weights, each output pixel found from the input
// pixel and tap; no columns gradient, no col2im. Same conditions.
std::optional<at::Tensor> implicit_gemm_convolution_input_grad(const at::Tensor& grad_output, const at::Tensor& input,
                                                               const at::Tensor& weight, c10::IntArrayRef stride,
                                                               c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                               int64_t groups);

}  // namespace openneuron::integration
