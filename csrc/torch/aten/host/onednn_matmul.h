// Large float32 matrix products on neuron through oneDNN (the library
// PyTorch already ships for its mkldnn ops) instead of ATen's BLAS. On this
// project's machine (AMD EPYC with AVX-512) MKL's sgemm takes its non-Intel
// code path and runs at about half oneDNN's speed for every shape a linear
// layer or its backward produces (measurements in the README).
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>

namespace openneuron::integration {

// A float32 matrix (2-D, strided) on `device`: what both matmul routes take.
bool plain_float_matrix(const at::Tensor& t, c10::Device device);

// Whether the few-row kernel and oneDNN beat ATen's BLAS (MKL) on this CPU:
// on all but Intel's (OPENNEURON_HOST_MATMUL overrides).
bool own_matmul_routes_are_faster();

// a @ b (+ bias, a 1-D [n] tensor, when given), or nullopt when oneDNN does
// not apply: not float32 matrices on one neuron device, an operand neither
// row- nor column-major, too little work to repay oneDNN's per-call setup,
// or mkldnn off (torch.backends.mkldnn.enabled) or not in this build.
std::optional<at::Tensor> onednn_matmul(const at::Tensor& a, const at::Tensor& b,
                                        const at::Tensor* bias = nullptr);

}  // namespace openneuron::integration
