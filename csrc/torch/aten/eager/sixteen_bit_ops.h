// float16 / bfloat16 calls of ops whose device kernels exist in float32
// only (the library's sort, arg-reduction and scatter kernels, pooling,
// upsampling, convolution's implicit gemm): run on float32 copies and
// rounded back once, where they took the CPU fallback. Each op listed
// either moves values without arithmetic (sort, topk, scatter, max
// pooling, nearest upsampling: bitwise the CPU's) or is computed by the
// CPU's 16-bit kernel in float too (pooling, interpolation, convolution,
// arange and linspace: one rounding, as here); scatter_add / index_add round once per slot,
// where the CPU rounds at each add (as accurate or more, as CUDA's float
// atomics). In-place and out= arguments receive the rounded results.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_sixteen_bit_in_float32(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration
