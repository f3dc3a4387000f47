// Dtypes CUDA supports where ATen's CPU kernels do not (ComplexHalf math,
// Half/BFloat16 pooling and losses, Half FFTs, Bool abs, integer histc,
// complex nansum): the host driver runs CPU kernels, so without this such an
// op would fail on neuron where it works on CUDA.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

namespace openneuron::integration {

// True when `error`, raised by `op`'s CPU kernel, may mean the kernel lacks a
// dtype (as "abs_cpu" not implemented for 'Bool', Unsupported dtype Half):
// run_with_cuda_dtypes decides from the arguments.
bool is_cpu_dtype_gap(const c10::OperatorHandle& op, const c10::Error& error);

// Thrown by a route whose CPU kernel lacks a dtype, so the op is run again
// through the boxed router, which calls run_with_cuda_dtypes.
struct CpuDtypeGap {};

// Runs `op` (its arguments on `stack`, neuron tensors) as CUDA would: in a
// wider dtype, rounded back (Half and BFloat16 in Float, ComplexHalf in
// ComplexFloat, Bool in Byte, as CUDA computes them in float anyway), or by
// an emulation of CUDA's kernel (integer histc, complex nansum). Returns
// false, leaving the stack as it was, when neither applies.
bool run_with_cuda_dtypes(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack);

// The widening alone: `op` runs again on copies of its Half/BFloat16
// (ComplexHalf, Bool) neuron tensors in the wider dtype, written arguments
// receive the rounded values, results are rounded back. False, the stack
// as it was, when no argument is of a narrow dtype.
bool run_in_wider_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// CUDA's histc of an integer tensor, as device ops (integer arithmetic,
// the data's range where min == max).
at::Tensor histc_of_integers(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max);

}  // namespace openneuron::integration
