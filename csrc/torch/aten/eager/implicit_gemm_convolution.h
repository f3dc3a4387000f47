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

// The gradients of such a convolution, each one kernel: the input's
// (conv2d_dgrad_t*: the output gradient times the weights, each output pixel
// found from the input pixel and tap; no columns gradient, no col2im), and
// the weights' (conv2d_wgrad_t*: each image's share, its output gradient
// times its columns read in place, summed over the images). A gradient not
// wanted, or that does not suit (as above, or shares that would outsize the
// columns), is nullopt: the caller takes im2col for it.
struct ImplicitGemmGrads {
  std::optional<at::Tensor> input, weight;
};
ImplicitGemmGrads implicit_gemm_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                     const at::Tensor& weight, c10::IntArrayRef stride,
                                                     c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                     int64_t groups, bool want_input, bool want_weight);

}  // namespace openneuron::integration
